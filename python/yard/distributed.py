"""A trial over several hosts (`yard run --hosts FILE`).

The server runs on the server host under the agent, measured there exactly as a local trial
measures it (yard/server.py). Every load host runs the experiment's load as written (so two
load hosts offer twice the connections of one), started by the agent, all of them at one agreed
instant (`yard-load --start-at`, moved onto each host's clock by the offset measured for it),
each writing an interval log (`--hist-log`). The harness adds the interval histograms of every
host inside the measured window (the warm-up dropped by time) and keeps every host's own row.

An experiment that names `{pki}` gets the run's certificates (yard/pki.py), made valid for the
server host's address too and copied once per run to every host (DIR/.yard-pki, replaced
whole); `{pki}` is that directory on the host the command runs on.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from .experiment import CPU_SWEEP, render
from .hdr import Interval, latency_us, merge, read_log
from .hosts import Host, HostError, Hosts, Session, close_all, copy_dir, on_each, receive_each
from .pki import pki_dir
from .runner import _metrics, _parse_json, _uses_pki  # as a local trial does

START_MARGIN_S = 2.0     # from the order to the agreed start: connections are set up meanwhile
RATE_FLOOR = 0.99        # a host under 99% of its target rate did not offer the load
PKI_DIR = ".yard-pki"    # {pki} on a host, under its dir

_pki_copied: dict[str, Path] = {}  # host name -> the local certificates copied there


def _pki_values(t, hosts: Hosts) -> dict[str, str]:
    """{pki} on each host (by name), when the trial names it: the run's certificates, valid for
    the server host's address, copied to each host the first time a trial needs them there."""
    if not _uses_pki(t):
        return {}
    local = pki_dir((hosts.server.address,) if hosts.server.address else ())

    def copy(h: Host) -> str:
        if _pki_copied.get(h.name) != local:
            copy_dir(h, local, PKI_DIR)
            _pki_copied[h.name] = local
        return f"{h.dir}/{PKI_DIR}"

    return dict(zip([h.name for h in hosts.all()], on_each(hosts.all(), copy)))


def _server_argv(argv: list[str], host: Host) -> list[str]:
    """The server listens where the load hosts can reach it, not on loopback."""
    out = []
    for a in argv:
        if a.startswith("127.0.0.1:"):
            a = f"{host.address}:{a.split(':', 1)[1]}"
        out.append(a)
    return out


def _open(hosts: list[Host]) -> dict[str, Session]:
    """An agent session on every host, their SSH connections and agents starting at once; then
    each host's clock measured."""
    sessions = {h.name: Session(h) for h in hosts}
    try:
        for s in sessions.values():
            s.measure_clock()
    except HostError:
        close_all(sessions.values())
        raise
    return sessions


def run_trial_hosts(t, hosts: Hosts, seq: int) -> dict:
    exp = t.exp
    rec: dict[str, Any] = {"experiment": exp.name, "alternative": t.alt.label,
                           "model": t.alt.model, "point": t.point, "rep": t.rep,
                           "started": time.time(), "status": "ok", "problems": [],
                           "hosts": {}}
    warmup = math.ceil(exp.warmup)   # whole intervals
    srv_host = hosts.server
    server_cpus = srv_host.cpus
    if CPU_SWEEP in t.point:
        server_cpus = srv_host.cpus[:t.point[CPU_SWEEP]]
    sessions: dict[str, Session] = {}
    pids: dict[str, list[int]] = {}   # per host: the agent, then the server or the load's group
    try:
        pki = _pki_values(t, hosts)
        values = {"bin": f"{srv_host.dir}/build/bin", **t.point, "duration": exp.duration,
                  "load_threads": 1}
        if pki:
            values["pki"] = pki[srv_host.name]
        server_argv = _server_argv(render(t.alt.argv, values), srv_host)
        rec["pinning"] = {"server_cpus": server_cpus, **{h.name: h.cpus for h in hosts.load}}
        sessions = _open(hosts.all())
        pids.update({n: [s.agent_pid] for n, s in sessions.items()})
        rec["clock"] = {n: {"offset_s": s.offset_s, "rtt_s": s.rtt_s} for n, s in sessions.items()}
        srv = sessions[srv_host.name]
        ans = srv.ask({"op": "serve", "argv": server_argv, "cpus": server_cpus,
                       "interval": exp.sample_interval, "name": f"trial{seq}"},
                      timeout=30)
        if "target" not in ans:
            rec["status"] = "failed"
            rec["problems"].append(f"{srv_host.where()}: the server did not start: "
                                   f"{ans.get('error')}")
            rec["cgroup"] = ans.get("cgroup")
            return rec
        target = ans["target"]
        pids[srv_host.name].append(ans["pid"])
        start_at = time.time() + START_MARGIN_S + max(s.rtt_s for s in sessions.values())
        commands = {"server": server_argv}
        for h in hosts.load:
            lv = dict(values, bin=f"{h.dir}/build/bin", target=target,
                      load_threads=max(1, len(h.cpus)), duration=warmup + exp.duration,
                      **({"pki": pki[h.name]} if pki else {}))
            argv = render(exp.load, lv) + ["--start-at", f"{start_at + sessions[h.name].offset_s:.6f}"]
            commands[h.name] = argv
            sessions[h.name].send({"op": "load", "argv": argv, "cpus": h.cpus, "hist_log": True,
                                   "timeout": exp.timeout + warmup + exp.duration + START_MARGIN_S})
        rec["commands"] = commands
        results = {}
        for h, first in zip(hosts.load, receive_each([sessions[h.name] for h in hosts.load], 30)):
            if first.get("op") == "started":
                pids[h.name].append(first["pgid"])
            else:  # it could not even start: that answer is its result
                results[h.name] = first
        # Sample the server over the measured window only.
        time.sleep(max(0.0, start_at + warmup - time.time()))
        srv.ask({"op": "sample"})
        running = [h.name for h in hosts.load if h.name not in results]
        results.update(zip(running, receive_each([sessions[n] for n in running],
                                                 exp.timeout + exp.duration + 30)))
        stop = srv.ask({"op": "stop"}, timeout=30)
        stop.pop("op", None)
        rec["problems"] += stop.pop("problems", [])
        rec.update(stop)
        _collect(rec, hosts, sessions, results, start_at, warmup, exp.duration)
    except HostError as e:
        rec["status"] = "failed"
        rec["problems"].append(str(e))
    finally:
        close_all(sessions.values())
        rec["problems"] += _leftovers(hosts, pids, rec)
    rec["metrics"] = _metrics(rec) if rec["status"] != "failed" or rec.get("totals") else {}
    return rec


def _collect(rec: dict, hosts: Hosts, sessions: dict[str, Session], results: dict,
             start_at: float, warmup: int, duration: float) -> None:
    logs: dict[str, list[Interval]] = {}
    offsets = {n: s.offset_s for n, s in sessions.items()}
    total = {"messages": 0, "errors": 0, "generator_cpu_pct": 0.0}
    for h in hosts.load:
        res = results[h.name]
        lj = _parse_json(res.get("stdout") or "")
        row = {"rc": res.get("rc"), "offset_s": offsets[h.name], "rtt_s": sessions[h.name].rtt_s}
        if res.get("left"):
            rec["problems"].append(f"{h.where()}: {len(res['left'])} process(es) of the load "
                                   "outlived it and were killed")
        if res.get("rc") != 0 or lj is None:
            rec["status"] = "failed"
            why = (lj or {}).get("first_error") or (res.get("stderr") or "")[-300:]
            rec["problems"].append(f"{h.where()}: load exit {res.get('rc')}: {why}")
            rec["hosts"][h.name] = row
            continue
        for k in ("messages", "errors", "throughput_per_s", "target_rate", "achieved_rate",
                  "generator_cpu_pct", "generator_saturated", "behind_schedule", "unsent",
                  "started_at_epoch_s"):
            row[k] = lj.get(k)
        if lj.get("started_at_epoch_s") is not None:
            row["start_skew_s"] = lj["started_at_epoch_s"] - offsets[h.name] - start_at
        try:
            logs[h.name] = read_log(res.get("hist_log_text") or "")
        except Exception as e:  # noqa: BLE001 - any decoding failure is this host's problem
            rec["status"] = "failed"
            rec["problems"].append(f"{h.where()}: its latency log could not be read: {e}")
            continue
        rec["hosts"][h.name] = row
        total["errors"] += int(lj.get("errors") or 0)
        total["generator_cpu_pct"] = max(total["generator_cpu_pct"],
                                         float(lj.get("generator_cpu_pct") or 0))
        if lj.get("generator_saturated") or lj.get("behind_schedule"):
            rec["status"] = "invalid" if rec["status"] == "ok" else rec["status"]
            rec["problems"].append(f"{h.where()}: its generator saturated or fell behind "
                                   f"({lj.get('generator_cpu_pct')}% CPU)")
        target = lj.get("target_rate") or 0
        if target and (lj.get("achieved_rate") or 0) < RATE_FLOOR * target:
            rec["status"] = "invalid" if rec["status"] == "ok" else rec["status"]
            rec["problems"].append(f"{h.where()}: achieved {lj.get('achieved_rate'):.0f}/s of "
                                   f"its target {target:.0f}/s (under {RATE_FLOOR:.0%})")
    if not logs:
        return
    # From the end of the warm-up to the last reply: the replies that drained after the
    # window's end (to requests sent in it) belong to the run, as in yard-load's own count.
    m = merge(logs, offsets, start_at + warmup)
    secs = max(m.seconds.values()) or duration
    for name, h in m.hosts.items():
        row = rec["hosts"][name]
        row["window_messages"] = h.get_total_count()
        row["window_throughput_per_s"] = h.get_total_count() / (m.seconds[name] or secs)
        row["latency_us"] = latency_us(h)
        row["intervals_dropped"] = m.dropped[name]
    total["messages"] = m.total.get_total_count()
    total["throughput_per_s"] = sum(rec["hosts"][n]["window_throughput_per_s"] for n in m.hosts)
    total["latency_us"] = latency_us(m.total)
    total["window_s"] = secs
    rec["load"] = {"stdout_json": total, "merged_from": sorted(m.hosts)}


def _leftovers(hosts: Hosts, pids: dict[str, list[int]], rec: dict) -> list[str]:
    """Check on every host that the trial's agent, server and load are gone: the agents kill
    their process groups when they stop or lose the harness; this is the check that they did.
    (Process ids, not names: on the test rig every host shares the machine's process table.)"""
    def probe(h: Host):
        mine = pids.get(h.name) or []
        if not mine:
            return None
        agent, rest = mine[0], mine[1:]
        checks = [f"kill -0 {agent} 2>/dev/null && echo agent {agent}"]
        checks += [f"kill -0 {p} 2>/dev/null && echo pid {p}; pgrep -g {p} -a" for p in rest]
        try:
            return h.run("; ".join(checks) + "; exit 0", timeout=20)
        except HostError as e:
            return e

    problems = []
    for h, r in zip(hosts.all(), on_each(hosts.all(), probe)):
        if r is None:
            continue
        if isinstance(r, HostError):
            problems.append(f"{h.where()}: could not check for leftover processes: {r}")
            continue
        if r.returncode != 0:
            problems.append(f"{h.where()}: could not check for leftover processes: "
                            f"{r.stderr.decode(errors='replace').strip()[-200:]}")
            continue
        left = [ln for ln in r.stdout.decode(errors="replace").splitlines() if ln.strip()]
        if left:
            problems.append(f"{h.where()}: left running after the trial: {'; '.join(left)[:300]}")
            if rec["status"] == "ok":
                rec["status"] = "failed"
    return problems
