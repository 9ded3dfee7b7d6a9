"""The uring model where the kernel refuses io_uring, and what only uring has.

yard-test-no-uring runs a command under a seccomp filter that makes the
io_uring system calls fail with EPERM, as container runtimes' default
profiles do."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, ROOT, model_unavailable, recv_exactly

NO_URING = BIN / "yard-test-no-uring"


def no_uring(*argv, **kw):
    return subprocess.run([str(NO_URING), *map(str, argv)], capture_output=True, text=True,
                          timeout=60, **kw)


def test_serve_exits_1_naming_the_cause():
    r = no_uring(BIN / "yard-serve", "--app", "echo", "--model", "uring",
                 "--listen", "127.0.0.1:0")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "listening" not in r.stdout
    assert "--model uring is unavailable on this machine" in r.stderr, r.stderr
    assert "seccomp" in r.stderr, r.stderr
    # The other models do not need io_uring and still run under the filter.
    r = no_uring(BIN / "yard-serve", "--app", "echo", "--model", "epoll", "--version")
    assert r.returncode == 0, r.stderr


def test_list_models_marks_it_unavailable_with_the_reason():
    r = no_uring(BIN / "yard-serve", "--list-models", "--json")
    assert r.returncode == 0, r.stderr
    models = {m["name"]: m for m in json.loads(r.stdout)}
    assert models["uring"]["available"] is False
    assert "EPERM" in models["uring"]["unavailable_reason"]
    assert all(m["available"] and m["unavailable_reason"] is None
               for name, m in models.items() if name != "uring")
    text = no_uring(BIN / "yard-serve", "--list-models").stdout
    assert "(unavailable here: io_uring_setup is refused (EPERM)" in text
    # Without the filter this machine has io_uring (the other tests need it).
    here = json.loads(subprocess.run([BIN / "yard-serve", "--list-models", "--json"],
                                     capture_output=True, text=True).stdout)
    assert {m["name"]: m["available"] for m in here}["uring"] == (model_unavailable("uring")
                                                                   is None)


def test_harness_skips_it_with_the_reason(tmp_path):
    """`yard run` under the filter: the uring alternative is skipped and
    said so (on the console, in meta.json and in the report); the others
    run."""
    exp = tmp_path / "tiny.toml"
    exp.write_text("""
[experiment]
name = "tiny"
[servers]
app = "echo"
models = ["epoll", "uring"]
[load]
argv = ["{bin}/yard-load", "echo", "--target", "{target}", "--connections", "2",
        "--messages", "50", "--json"]
[run]
duration = 1
repetitions = 1
""")
    res = tmp_path / "results"
    env = {"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"}
    r = no_uring(sys.executable, "-m", "yard.cli", "--results-dir", res, "--bin-dir", BIN,
                 "run", exp, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "tiny: skipping uring: --model uring is unavailable here: io_uring_setup is " \
           "refused (EPERM)" in r.stdout, r.stdout[-3000:]
    meta = json.loads((res / "latest" / "meta.json").read_text())
    assert [(s["alternative"], s["model"]) for s in meta["skipped"]] == [("uring", "uring")]
    raw = [json.loads(p.read_text()) for p in (res / "latest" / "raw").rglob("*.json")]
    assert {t["alternative"] for t in raw} == {"epoll"}
    # Every epoll trial ran in full (a tiny run may be flagged invalid when
    # the generator's core is busy: that is the harness's verdict, not ours).
    for t in raw:
        assert t["status"] in ("ok", "invalid"), t["problems"]
        assert (t["load"]["stdout_json"]["messages"], t["load"]["stdout_json"]["errors"]) == (100, 0)
    html = (res / "latest" / "report.html").read_text()
    assert "Skipped on this machine: tiny uring (--model uring: io_uring_setup is refused" in html
