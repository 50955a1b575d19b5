"""Secret-bait queries never surface a secret under any preset that declares the secret guard."""
from evalkit.workflows.bench import runnable_presets
from evalkit.data.registry import load_dataset
from evalkit.engine.runner import run_quality
from retrievers.index.shared import SharedIndex


def _guarded(p) -> bool:
    for s in p.stages:
        prm = s.params()
        if s.name == "filter.secret_guard" or prm.get("secret_guard") is True or prm.get("exclude_secrets") is True:
            return True
    return False


def test_secret_bait_never_returns_a_secret_under_guarded_presets():
    ds = load_dataset("memory-workspace").split("all")
    bait = [q for q in ds.queries if q.category == "secret-bait"]
    assert len(bait) >= 30
    ds.queries = bait
    pipes, _ = runnable_presets(log=lambda *a: None)
    guarded = [p for p in pipes if _guarded(p)]
    assert guarded, "no preset declares the secret guard"
    secret = {d.id for d in ds.documents if d.metadata.get("contains_secret")}
    assert secret
    runs = run_quality(ds, guarded, SharedIndex(ds))
    for name, run in runs.items():
        for qid, r in run.results.items():
            leaked = secret & ({d for d, _ in r.ranked} | set(r.injected))
            assert not leaked, (name, qid, leaked)
