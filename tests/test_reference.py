"""`evalkit reference`: the README tables come from run metrics (here synthetic), never typed."""
from evalkit.workflows import reference


def test_render_tables_from_metrics(monkeypatch, tmp_path):
    means = {("scifact", "bm25", "ndcg@10"): 0.67912, ("scifact", "bm25", "recall@100"): 0.9127,
             ("longmemeval-s", "dense", "recall_any@5"): 0.95726, ("longmemeval-s", "dense", "ndcg@10"): 0.89}
    cats = {("longmemeval-s", "dense", "single-session-assistant", "recall_any@5"): (0.94545, 55),
            ("longmemeval-s", "bm25", "single-session-assistant", "recall_any@5"): (1.0, 55),
            ("longmemeval-s", "dense", "multi-session", "recall_any@5"): (0.983, 121)}
    monkeypatch.setattr(reference, "collect_rows", lambda folders: (means, cats))
    md = reference.render([tmp_path])
    assert "| bm25 | 0.6791 | 0.9127 | 0.679 (bm25s, REFERENCE_NUMBERS.md); 0.913 (bm25s check run) |" in md
    assert "| dense | 0.9573 | – | 0.8900 |" in md
    assert "| retriever | multi-session (n=121) | single-session-assistant (n=55) |" in md
    assert "| dense | 0.983 | 0.945 |" in md and "| bm25 | – | 1.000 |" in md
    assert "LoCoMo" not in md  # no locomo metrics, no table

    readme = tmp_path / "README.md"
    readme.write_text(f"a\n{reference.BEGIN}\nstale\n{reference.END}\nb\n", encoding="utf-8")
    reference.write_readme(readme, md, "evalkit reference x")
    text = readme.read_text(encoding="utf-8")
    assert "stale" not in text and text.startswith("a\n") and text.endswith("b\n") and "0.6791" in text
