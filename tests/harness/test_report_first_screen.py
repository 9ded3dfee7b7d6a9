"""Issue 41 end to end: a real run (`yard bench smoke`, shared with the other timing tests
through harness_smoke; not on a TTY) prints a line per experiment started and finished and ends
with the verdict rows and the report's path; the report opens on the verdict section, with a
row per experiment of the run; headless Chromium opens it without a network and its first
screen is screenshotted."""

import json
import re
import shutil
import subprocess

import pytest

from harness_paths import BIN
from harness_smoke import smoke_run

pytestmark = [
    pytest.mark.skipif(not ((BIN / "yard-serve").exists() and (BIN / "yard-load").exists()),
                       reason=f"needs yard-serve and yard-load in {BIN}"),
    # A benchmark run: its trials are valid only when server and load have their CPUs.
    pytest.mark.timing,
]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def run():
    return smoke_run()


def _experiments(latest):
    return [e["name"] for e in json.loads((latest / "meta.json").read_text())["experiments"]]


def test_progress_lines_and_the_verdicts_at_the_end(run):
    latest, stdout = run
    lines = stdout.strip().splitlines()
    names = _experiments(latest)
    assert {"echo_scaling", "rest_scaling", "tls"} <= set(names), names
    # Not a TTY: one line per experiment started and finished, trials done/total, time left.
    n = len(names)
    for i, name in enumerate(names, 1):
        assert any(re.match(rf"yard: \[{i}/{n}\] {name} started: \d+ trials planned \(at most \d+\);"
                            r" suite: \d+/\d+ trials done, \d+m\d\ds elapsed, about \d+m\d\ds left",
                            line) for line in lines), (name, stdout)
        assert any(re.match(rf"yard: \[{i}/{n}\] {name} finished: \d+ trials in \d+m\d\ds", line)
                   for line in lines), (name, stdout)
    # The last lines: the verdict rows, then the report's path.
    assert lines[-1].endswith("report.html")
    head = lines.index("Verdicts (best and worst per experiment; ratio [95% CI]; "
                       ">= or <=: a bound the generator set):")
    rows = lines[head + 1:-1]
    assert [r.strip().split(":", 1)[0] for r in rows] == names
    scaling = rows[names.index("echo_scaling")]
    assert re.search(r"best (epoll|reactors), worst (epoll|reactors), .*\d\.\d\dx", scaling)


def test_the_report_opens_on_the_verdicts(run, tmp_path):
    latest, _ = run
    html = (latest / "report.html").read_text()
    meta = json.loads((latest / "meta.json").read_text())
    body = html.split("<body>", 1)[1]
    assert body.index("<section") == body.index("<section id='verdicts'>")
    assert body.index("<section id='verdicts'>") < body.index("<h2>The models</h2>")
    verdict = body.split("<section id='verdicts'>", 1)[1].split("</section>", 1)[0]
    rows = re.findall(r"<tr class='verdict-row' data-experiment='([^']+)'>", verdict)
    assert rows == [e["name"] for e in meta["experiments"]]
    assert "<table class='heatmap'>" in verdict
    # Each point's trials and why they stopped, in meta.json and folded in the report.
    assert meta["stops"] and all(s["done"] and s["n"] >= 1 for s in meta["stops"])
    assert [t["experiment"] for t in meta["timings"]] == rows
    assert "Trials per point and why they stopped" in html
    assert not re.search(r"(src|href)=['\"]https?:", html)

    chromium = _chromium()
    if chromium is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; "
                    "make deps installs it): the screenshot of the first screen is not taken")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
             # No network: the report must be whole without one.
             "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
    url = (latest / "report.html").resolve().as_uri()
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # The browser parsed it: the first section of its DOM is the verdicts.
    first = re.search(r"<section id=\"([^\"]+)\"", dom.stdout)
    assert first and first.group(1) == "verdicts", dom.stdout[:500]
    shot = latest / "first-screen.png"
    p = subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1280,900", url],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and shot.exists(), p.stderr[-2000:]
    import matplotlib.image as mpimg
    img = mpimg.imread(str(shot))
    assert img.shape[0] == 900 and img.shape[1] == 1280
    # Not a blank page: the heat-map's colours are on the first screen (green and red cells).
    rgb = img[..., :3]
    greenish = ((rgb[..., 1] > rgb[..., 0] + 0.15) & (rgb[..., 1] > rgb[..., 2] + 0.15)).sum()
    assert rgb.std() > 0.05 and greenish > 200, (rgb.std(), greenish)
