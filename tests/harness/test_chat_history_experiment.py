"""The chat_history experiment end to end: the harness starts bench/chat_serve with a generated
log, runs bench/chat_history.py as the load step, and keeps its figures (history latencies, the
persisted rate) as trial metrics that the report shows. Also the load script's own refusals and
the runner's reading of a load's "metrics" object."""

import json
import re
import subprocess
import sys
import tomllib

import pytest

from harness_paths import BIN, REPO
from harness_smoke import smoke_run

from yard.runner import _metrics

EXP = REPO / "experiments" / "chat_history.toml"
needs_bins = pytest.mark.skipif(
    not all((BIN / b).exists() for b in ("yard-serve", "yard-load", "yard-chat")),
    reason=f"needs yard-serve, yard-load and yard-chat in {BIN}")


def smoke_settings():
    data = tomllib.loads(EXP.read_text())
    smoke = data["suites"]["smoke"]
    point = {k: v[0] for k, v in data["sweep"].items()}
    point.update({k: v[0] for k, v in smoke.get("sweep", {}).items()})
    return smoke, point


@needs_bins
@pytest.mark.timing  # the load sent and persisted at its rates, within 2%
def test_smoke_run_measures_history_and_persistence():
    smoke, point = smoke_settings()
    duration = smoke["duration"]
    latest, _ = smoke_run()
    raw = sorted((latest / "raw" / "chat_history").glob("*.json"))
    trials = [json.loads(f.read_text()) for f in raw]
    assert {t["alternative"] for t in trials} == set(smoke["models"])
    # The three phases' planned requests (bench/chat_history.py: 50 requests/s, idle for half
    # the duration, live for three quarters of it).
    n_idle, n_live = round(duration / 2 * 50), round(duration * 0.75 * 50)
    for t in trials:
        where = (t["alternative"], t["retry"] if "retry" in t else 0)
        # A trial may be invalid only by the harness's generator rule, never failed.
        assert t["status"] in ("ok", "invalid"), (where, t["problems"])
        if t["status"] == "invalid":
            assert all(re.search(r"generator (fell behind|saturated)", pr)
                       for pr in t["problems"]), (where, t["problems"])
        assert t["server_exit"] == 0, (where, t.get("server_stderr"))
        load = t["commands"]["load"]
        assert load[0] == "bench/chat_history.py"
        assert re.fullmatch(r"127\.0\.0\.1:\d+", load[load.index("--target") + 1])
        lj = t["load"]["stdout_json"]
        assert lj["errors"] == 0 and lj["first_error"] is None, (where, lj.get("problems"))
        m = t["metrics"]
        for phase, n in (("idle", n_idle), ("live", n_live)):
            assert m[f"history_{phase}_requests"] == n, (where, phase)
            assert m[f"history_{phase}_answers"] == n, (where, phase)
            assert m[f"history_{phase}_messages_min"] == 100, (where, phase)
            assert m[f"history_{phase}_messages_max"] == 100, (where, phase)
            p50, p99, mx = (m[f"history_{phase}_{k}_us"] for k in ("p50", "p99", "max"))
            assert 0 < p50 <= p99 <= mx < 5e6, (where, phase, p50, p99, mx)
        # The server opened the generated log: the newest message is the last one generated.
        assert m["history_idle_newest_msgid"] == point["logged"]
        # Live traffic ran during the live requests, and every message reached every member.
        members = point["members"]
        sent = m["live_messages_sent"]
        assert sent == pytest.approx(point["rate"] * duration, rel=0.02)
        assert m["live_deliveries"] == sent * (members - 1)
        assert m["live_unsent"] == 0
        # Persisted: 8 senders at persist_rate, each message relayed to the 7 others.
        psent = m["persist_messages_sent"]
        assert m["persist_deliveries"] == psent * 7 and m["persist_unsent"] == 0
        assert m["persisted_per_s"] == pytest.approx(point["persist_rate"], rel=0.02)
        assert m["cpu_s"] > 0
        assert t["pinning"]["server_cpus"] != t["pinning"]["load_cpus"]
    html = (latest / "report.html").read_text()
    section = html.split("<h2>Chat history", 1)[1].split("</section>", 1)[0]
    assert "CHATHISTORY p99, live traffic (µs)" in section
    assert "persisted messages/s (--fsync interval)" in section
    for model in smoke["models"]:
        assert re.search(rf"<tr><td>{model}</td><td>logged={point['logged']}, ", section), model
    assert section.count("data:image/png;base64,") >= 1
    summary = (latest / "summary.csv").read_text()
    assert ",history_live_p99_us," in summary and ",persisted_per_s," in summary
    # "A few seconds": no smoke run of this experiment may take the time of a quick suite.
    timings = json.loads((latest / "meta.json").read_text())["timings"]
    took = [t["seconds"] for t in timings if t["experiment"] == "chat_history"]
    assert took and took[0] < 120, timings


@needs_bins
def test_load_step_fails_when_the_log_is_not_the_one_generated(tmp_path):
    """--logged names the messages chat_serve generated; a log that disagrees fails the step
    with an explained first_error, and no yard-load is left behind."""
    srv = subprocess.Popen([str(REPO / "bench" / "chat_serve"), "--log-messages", "300", str(BIN),
                            "9", "--model", "epoll", "--listen", "127.0.0.1:0", "--flood-rate", "0"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        m = re.fullmatch(r"listening (127\.0\.0\.1:\d+)\n", line)
        assert m, line
        p = subprocess.run([sys.executable, str(REPO / "bench" / "chat_history.py"), "--target",
                            m.group(1), "--bin", str(BIN), "--logged", "301", "--members", "4",
                            "--rate", "100", "--duration", "0.5", "--persist-rate", "200",
                            "--persist-senders", "4"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 1, p.stderr
        out = json.loads(p.stdout)
        assert "newest message has msgid 300, not 301" in out["first_error"]
        # The rest still ran and was measured.
        assert out["metrics"]["history_idle_newest_msgid"] == 300
        assert out["metrics"]["history_live_answers"] == round(0.5 * 0.75 * 50)
        assert out["metrics"]["persist_messages_sent"] == 100
    finally:
        srv.terminate()
        srv.wait(10)
    assert srv.returncode == 0
    left = subprocess.run(["pgrep", "-f", f"yard-load chat --target {m.group(1)} "],
                          capture_output=True, text=True).stdout
    assert not left.strip()


def test_a_loads_metrics_object_becomes_trial_metrics():
    lj = {"errors": 0, "achieved_rate": 1000.0,
          "metrics": {"history_live_p99_us": 812.5, "nested": {"x": 2}, "flag": True,
                      "achieved_rate": 1.0, "note": "text"}}
    m = _metrics({"samples": [], "load": {"stdout_json": lj}})
    assert m["history_live_p99_us"] == 812.5 and m["nested.x"] == 2.0
    assert m["achieved_rate"] == 1000.0  # yard-load's own field is not replaced
    assert "flag" not in m and "note" not in m
