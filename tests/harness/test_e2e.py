"""End to end: `yard bench smoke` runs real servers and writes a report with a row per model."""

import json
import math
import re
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


def test_bench_smoke():
    latest, stdout = smoke_run()
    report = latest / "report.html"
    assert stdout.strip().endswith("report.html"), stdout[-500:]
    html = report.read_text()
    models = json.loads(subprocess.run([str(BIN / "yard-serve"), "--list-models", "--json"],
                                       capture_output=True, text=True).stdout)
    names = [m["name"] for m in models]
    assert names
    meta = json.loads((latest / "meta.json").read_text())
    smoke = [e for e in meta["experiments"] if e["kind"] == "server"]
    assert smoke
    for m in names:
        # A feature-table row and a results-table row per model.
        assert re.search(rf"<tr><td><b>{m}</b></td>", html), m
        assert re.search(rf"<tr><td>{m}</td><td>connections=", html), m
    assert "data:image/png;base64," in html
    trials = (latest / "trials.csv").read_text().splitlines()
    assert trials[0].startswith("experiment,alternative")
    assert any(",ok," in line for line in trials[1:])
    raw = list((latest / "raw").rglob("*.json"))
    server_raw = [json.loads(p.read_text()) for p in raw if p.parent.name != "cswitch"]
    rec = server_raw[0]
    assert rec["cgroup"]["kind"] in ("v1", "v2", "proc")
    assert rec["server_exit"] == 0
    # The context-switch lab is a tool experiment in the same report: one trial per kind and
    # point, every one ok with a positive cost, and its two figures (bars, curves) drawn.
    cs = [json.loads(p.read_text()) for p in raw if p.parent.name == "cswitch"]
    kinds = {t["alternative"] for t in cs}
    assert {"process-pipe", "thread-futex", "ucontext", "coro"} <= kinds
    # With no working set the switch is all there is to time, so its cost is above zero; with
    # one, the smoke size's 2000 switches make it a difference of two close, noisy totals (it
    # came out at -11 ns for coro on a loaded machine), so there it must only be a number.
    bad = [(t["alternative"], t["point"], t["status"], t["problems"], t["metrics"].get("direct_ns"))
           for t in cs if not (t["status"] == "ok" and math.isfinite(t["metrics"]["direct_ns"]) and
                               (t["point"]["array_bytes"] > 0 or t["metrics"]["direct_ns"] > 0))]
    assert not bad, bad
    section = html.split("<h2>Context switch", 1)[1].split("</section>", 1)[0]
    assert section.count("data:image/png;base64,") == 2
    # The scaling experiments: the server's CPU count is a sweep point; a multi-loop model runs
    # that many loops, the generator one thread per remaining CPU, each pinned apart.
    sc = [json.loads(p.read_text()) for p in raw if p.parent.name == "echo_scaling"]
    assert {t["alternative"] for t in sc} == {"epoll", "reactors"}
    for t in sc:
        assert t["status"] == "ok", t["problems"]
        assert t["point"]["server_cpus"] == 1 and t["pinning"]["server_cpus"] == [0]
        threads = t["commands"]["load"][t["commands"]["load"].index("--threads") + 1]
        assert int(threads) == len(t["pinning"]["load_cpus"]) >= 1
        workers = "--workers" in t["commands"]["server"]
        assert workers == (t["alternative"] == "reactors")
    # TLS (docs/tls.md): certificates made for the run ({pki}), the models listening with
    # --tls-listen, the load speaking TLS to tls:HOST:PORT; handshakes full, then resumed.
    hs = {t["point"]["resume"]: t for t in (json.loads(p.read_text()) for p in raw
                                            if p.parent.name == "tls")}
    assert set(hs) == {"off", "on"}
    # A TLS client does as much crypto as the server (it verifies what the server signs, and
    # seals and opens every record): on two cores the generator can saturate first, which the
    # harness marks invalid (a lower bound for the server), not a failure.
    def ok_or_generator_bound(t):
        return t["status"] == "ok" or (t["status"] == "invalid" and all(
            "generator saturated" in p for p in t["problems"]))

    for resume, t in hs.items():
        assert ok_or_generator_bound(t), t["problems"]
        assert t["commands"]["load"][t["commands"]["load"].index("--target") + 1].startswith("tls:")
        tls = t["load"]["stdout_json"]["tls"]
        assert tls["failures"] == 0 and tls["full_handshakes"] + tls["resumed_handshakes"] > 0
        assert (tls["resumed_handshakes"] > 0) == (resume == "on"), tls
    te = {t["alternative"]: t for t in (json.loads(p.read_text()) for p in raw
                                        if p.parent.name == "tls_echo")}
    assert set(te) == {"epoll", "epoll+tls"}
    assert all(ok_or_generator_bound(t) for t in te.values()), [t["problems"] for t in te.values()]
    assert te["epoll"]["load"]["stdout_json"]["tls"] is None
    assert te["epoll+tls"]["load"]["stdout_json"]["tls"]["full_handshakes"] == 10
