"""One `yard bench smoke` run, shared by the timing tests that read it (test_e2e,
test_report_first_screen, test_chat_history_experiment): each used to run its own, 28 s of
make test's timing phase spent running the same experiments again (issue 45). The run is made
on first use, in the process that asks (the timing tests run in one process, alone), with the
progress lines a user sees (not --quiet); its directory goes when the process ends."""

import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness_paths import BIN, REPO


@functools.cache
def smoke_run() -> tuple[Path, str]:
    """(the run's results directory, `latest`; what the command printed on stdout)."""
    top = Path(tempfile.mkdtemp(prefix="yard-smoke-"))
    atexit.register(shutil.rmtree, top, ignore_errors=True)
    res = top / "results"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "yard.cli", "--results-dir", str(res),
                        "--bin-dir", str(BIN), "bench", "smoke"],
                       cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={"PYTHONPATH": str(REPO / "python"), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, f"yard bench smoke exited {p.returncode} after " \
        f"{time.monotonic() - t0:.0f} s:\n{p.stderr[-3000:]}"
    return res / "latest", p.stdout
