"""`evalkit reference`: the README tables come from run metrics (here synthetic), never typed."""
from evalkit.workflows import reference


def test_render_tables_from_metrics(monkeypatch, tmp_path):
    means = {("scifact", "bm25", "ndcg@10"): 0.67912, ("scifact", "bm25", "recall@100"): 0.9127,
             ("longmemeval-s", "dense", "recall_any@5"): 0.95726, ("longmemeval-s", "dense", "ndcg@10"): 0.89}
    cats = {("longmemeval-s", "dense", "single-session-assistant", "recall_any@5"): (0.94545, 55),
            ("longmemeval-s", "bm25", "single-session-assistant", "recall_any@5"): (1.0, 55),
            ("longmemeval-s", "dense", "multi-session", "recall_any@5"): (0.983, 121)}
    monkeypatch.setattr(reference, "collect_rows", lambda folders: (means, cats))
    monkeypatch.setattr(reference, "collect_denominators",
                        lambda folders: {"scifact": "every measure is a mean over 300 judged of the 300 test queries"})
    monkeypatch.setattr(reference, "collect_search", lambda folders: {"scifact": "vector search: exact"})
    md = reference.render([tmp_path])
    assert "**SciFact (BEIR, test split, 300 queries)**\n\n_Every measure is a mean over 300 judged of the 300 test " \
           "queries; vector search: exact._\n\n| retriever |" in md
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


def test_denominators_come_from_the_run_folder(tmp_path):
    import json
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"schema_version": 1, "datasets": {
        "ws": {"queries": 4, "split": "test"}}}))
    (run / "metrics.json").write_text(json.dumps({"schema_version": 1, "rows": []}))
    (run / "per_query.csv").write_text("dataset,retriever,query_id,category,metric,value\n"
                                       "ws,bm25,q1,,ndcg@10,0.5\nws,bm25,q2,,ndcg@10,1.0\nws,dense,q2,,ndcg@10,0.3\n"
                                       "ws,bm25,q3,,recall@10,1.0\n")
    assert reference.collect_denominators([run]) == {
        "ws": "every measure is a mean over 2 judged of the 4 test queries; the other 2 have no relevant document "
              "and are not in these means"}


def test_the_vector_backend_comes_from_the_run_manifest(tmp_path):
    import json
    runs = []
    for name, idx in [("a", {"backend": "exact", "search": "exact (float32 shortlist, float64 final score, ties by "
                                                        "document)", "vectors_used": True}),
                      ("b", {"backend": "hnsw", "search": "approximate (HNSW)", "vectors_used": True,
                             "hnsw_recall_vs_exact": {"k": 100, "queries": 64, "recall": 0.9871}}),
                      ("c", {"backend": "exact", "vectors_used": False})]:
        run = tmp_path / name
        run.mkdir()
        (run / "manifest.json").write_text(json.dumps({"schema_version": 1, "datasets": {f"ds-{name}": {"index": idx}}}))
        (run / "metrics.json").write_text(json.dumps({"schema_version": 1, "rows": []}))
        runs.append(run)
    assert reference.collect_search(runs) == {
        "ds-a": "vector search: exact (float32 shortlist, float64 final score, ties by document)",
        "ds-b": "vector search: hnsw, approximate (HNSW) — recall@100 0.9871 against exact on 64 queries"}
