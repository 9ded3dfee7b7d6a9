"""Locust, headless for a few seconds, runs the study's scenarios against
yard-serve --app rest --model epoll without a single failure."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from tlslib import make_pki, tls_args

# Looked up, not imported: importing locust monkey-patches the whole test process with gevent
# (sockets, threads, subprocess pipes), which breaks other tests and pytest-xdist's workers.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("locust") is None,
                                reason="the locust package is not installed (pip install locust)")


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_locust_scenarios_have_no_failures(serve, tmp_path, scheme):
    """Over HTTPS too (docs/tls.md): Locust's requests check the server's
    certificate against the test CA (YARD_TLS_CA, loadtests/locustfile.py)."""
    flags, env = [], dict(os.environ)
    if scheme == "https":
        pki = make_pki(tmp_path / "pki")
        flags = tls_args(pki)
        env["YARD_TLS_CA"] = str(pki.ca)
    srv = serve("rest", "epoll", "--bcrypt-cost", "4", "--longpoll-ms", "300", *flags)
    port = srv.tls_addrs[0][1] if scheme == "https" else srv.port
    host = "localhost" if scheme == "https" else srv.host
    final = tmp_path / "final"
    # The final stats come from --json-file: the CSV files are written every second while the
    # run lasts, and the last write can come before the end (on a loaded machine, a CSV with
    # no request in it while 13 had been made).
    p = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests" / "locustfile.py"),
         "--headless", "-u", "8", "-r", "8", "-t", "4s", "--stop-timeout", "5",
         "--host", f"{scheme}://{host}:{port}", "--json-file", str(final), "--only-summary",
         "PasswordTest", "UserInfo", "LongPoll"],
        capture_output=True, text=True, timeout=60, env=env)
    stats = json.loads((tmp_path / "final.json").read_text())
    assert sum(r["num_requests"] for r in stats) > 0, p.stderr[-2000:]
    assert sum(r["num_failures"] for r in stats) == 0, p.stderr[-2000:]
    names = {r["name"] for r in stats}
    assert {"/password/set/[user]", "/password/verify/[user]", "/user/set/[user]",
            "/user/get/[user]", "/longPoll"} <= names
    assert p.returncode == 0, p.stderr[-2000:]
