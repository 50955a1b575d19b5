"""The run report opened in a real headless Chromium: the DOM has its tables, plots and findings, and a screenshot of
the page is not blank."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from tests.helpers import report_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return report_run(tmp_path_factory.mktemp("report") / "ws-run")


def _chromium() -> tuple[str | None, str]:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path, ""
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        try:
            proc = subprocess.run(["apt-get", "install", "-y", "chromium"], capture_output=True, text=True,
                                  timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"apt-get install -y chromium failed: {exc}"
        path = shutil.which("chromium")
        if path:
            return path, ""
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"apt-get install -y chromium failed (exit {proc.returncode}): {tail[0]}"
    return None, "no chromium binary and no root apt-get to install Debian's chromium package"


def _headless(browser: str, profile, *args: str) -> subprocess.CompletedProcess:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_report_renders_in_headless_chromium(run_dir, tmp_path):
    browser, why = _chromium()
    if browser is None:
        pytest.skip(why)
    url = (run_dir / "report.html").resolve().as_uri()
    dom = _headless(browser, tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-500:]
    html = dom.stdout
    assert html.count("<table") > 0
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', html)) >= 5
    assert "Key findings" in html
    shot = tmp_path / "report.png"
    res = _headless(browser, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1400,3000", url)
    assert res.returncode == 0, res.stderr[-500:]
    assert shot.exists() and shot.stat().st_size > 30_000
    import matplotlib.image as mpimg
    img = mpimg.imread(str(shot))
    assert img.shape[0] == 3000 and img.shape[1] == 1400
    rgb = img[..., :3]
    non_white = np.mean(np.any(rgb < 0.9, axis=-1))
    assert non_white > 0.03, f"page looks blank ({non_white:.1%} non-white pixels)"
    colours = np.unique((rgb[::4, ::4] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 100  # text, tables, plots: far more than a blank or error page


def test_bench_overview_renders_in_headless_chromium(tmp_path):
    """A two-dataset (bench-style) report opens with its three SVG pictures, drawn (not blank) by a real browser;
    the hover names are in the DOM as SVG titles and abbr titles."""
    browser, why = _chromium()
    if browser is None:
        pytest.skip(why)
    from evalkit.report import write_reports
    from tests.unit.evalkit.report.test_overview import _bench_writer
    w = _bench_writer(tmp_path / "bench")
    write_reports(w)
    w.write()
    url = (tmp_path / "bench" / "report.html").resolve().as_uri()
    dom = _headless(browser, tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-500:]
    page = dom.stdout
    glance = page[page.index("At a glance"):page.index("Key findings")]
    assert glance.count("<svg") == 3
    assert "<title>tool_2026_1_1_fixed_scale</title>" in glance
    assert '<abbr title="tool_2026_1_1_fixed_scale">' in page
    shot = tmp_path / "overview.png"
    res = _headless(browser, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1400,1400", url)
    assert res.returncode == 0, res.stderr[-500:]
    import matplotlib.image as mpimg
    rgb = mpimg.imread(str(shot))[..., :3]
    # the heatmap's blue cells: many strongly blue pixels in the top of the page (a blank or unstyled page has none)
    blue = (rgb[..., 2] > 0.5) & (rgb[..., 0] < 0.35)
    assert blue.mean() > 0.01, f"no heatmap drawn ({blue.mean():.2%} blue pixels)"
