"""Running trials: a fresh server per trial in its own cgroup, pinned; the load; the samples."""

from __future__ import annotations

import json
import os
import platform
import random
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .experiment import Alternative, Experiment, render
from .pki import pki_dir
from .server import MeasuredServer, pinned
from .stats import Stop, cpu_mean_cv, stop_rule

@dataclass
class Trial:
    exp: Experiment
    alt: Alternative
    point: dict[str, Any]
    rep: int


def _parse_json(text: str) -> dict | None:
    text = text.strip()
    if not text:
        return None
    try:
        v = json.loads(text)
    except json.JSONDecodeError:
        # Tolerate a tool that prints something before its JSON object.
        i = text.rfind("\n{")
        try:
            v = json.loads(text[i + 1:]) if i >= 0 else None
        except json.JSONDecodeError:
            return None
    # A tool that prints a list of points (yard-cswitch) measures one point per trial here.
    if isinstance(v, list) and len(v) == 1:
        v = v[0]
    return v if isinstance(v, dict) else None


def _run_cmd(argv: list[str], cpus: set[int], timeout: float) -> dict:
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=pinned(cpus))
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, rc = f"timed out after {timeout} s", None
    except OSError as e:
        out, err, rc = "", str(e), None
    return {"argv": argv, "rc": rc, "stdout_json": _parse_json(out), "stderr": err[-2000:],
            "wall_s": time.monotonic() - t0}


def _uses_pki(t: Trial) -> bool:
    return any("{pki}" in a for a in [*t.alt.argv, *t.exp.load])


def run_trial(t: Trial, bin_dir: Path, seq: int) -> dict:
    scpus, lcpus = t.exp.placement(t.point, os.sched_getaffinity(0))
    values = {"bin": str(bin_dir), **t.point, "duration": t.exp.duration,
              "load_threads": max(1, len(lcpus))}
    if _uses_pki(t):
        values["pki"] = str(pki_dir())
    rec: dict[str, Any] = {"experiment": t.exp.name, "alternative": t.alt.label,
                           "model": t.alt.model, "point": t.point, "rep": t.rep,
                           "started": time.time(), "status": "ok", "problems": []}
    if t.exp.kind == "tool":
        argv = render(t.alt.argv, values)
        cpus = t.exp.tool_cpus(t.point, os.sched_getaffinity(0))
        res = _run_cmd(argv, cpus, t.exp.timeout)
        rec["commands"] = {"tool": argv}
        rec["pinning"] = {"tool_cpus": sorted(cpus)}
        rec["tool"] = res
        if res["rc"] != 0 or res["stdout_json"] is None:
            rec["status"] = "failed"
            rec["problems"].append(f"tool exit {res['rc']}: {res['stderr'][-300:]}")
        rec["metrics"] = _tool_metrics(res["stdout_json"] or {})
        return rec

    server_argv = render(t.alt.argv, values)
    srv = MeasuredServer(server_argv, scpus, f"yard-{os.getpid()}-{seq}", t.exp.sample_interval)
    rec["pinning"] = {"server_cpus": sorted(scpus), "load_cpus": sorted(lcpus)}
    try:
        target = srv.start()
        if target is None:
            rec["status"] = "failed"
            return rec
        values["target"] = target
        load_argv = render(t.exp.load, values)
        rec["commands"] = {"server": server_argv, "load": load_argv}
        if t.exp.warmup > 0:
            wvals = dict(values, duration=t.exp.warmup)
            rec["warmup"] = _run_cmd(render(t.exp.load, wvals), lcpus, t.exp.timeout)
        srv.begin_sampling()
        load = _run_cmd(load_argv, lcpus, t.exp.timeout + t.exp.duration)
        srv.end_sampling()
        rec["load"] = load
        lj = load["stdout_json"]
        if load["rc"] != 0 or lj is None:
            rec["status"] = "failed"
            why = (lj or {}).get("first_error") or load["stderr"][-300:]
            rec["problems"].append(f"load exit {load['rc']}: {why}")
    finally:
        out = srv.stop()
        rec["problems"] += out.pop("problems")
        rec.update(out)
    rec["metrics"] = _metrics(rec)
    _judge_generator(rec, len(scpus) or len(os.sched_getaffinity(0)))
    return rec


def _flat_numbers(d: dict, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            out[key] = float(v)
        elif isinstance(v, dict):
            out.update(_flat_numbers(v, key + "."))
    return out


def _tool_metrics(out: dict) -> dict[str, float]:
    """Every number of a tool's JSON, plus misses per 1000 instructions for each hardware
    counter a tool reports beside `instructions` (yard-cswitch's `counters` object)."""
    m = _flat_numbers(out)
    for prefix in ("counters.",):
        instr = m.get(prefix + "instructions")
        if not instr:
            continue
        for k in list(m):
            if k.startswith(prefix) and k.endswith("_misses"):
                m[k[len(prefix):] + "_per_kinst"] = 1000.0 * m[k] / instr
    return m


SERVER_BUSY_PCT = 90.0


def _judge_generator(rec: dict, server_cores: int) -> None:
    """Whether the generator, not the server, set the figure.

    A generator that fell behind its schedule did not send the load it claims: invalid. One
    that used its whole core is the bottleneck only if the server still had room: a server at
    SERVER_BUSY_PCT of its cores or more was at its own limit too, so the figure is the
    server's capacity there and the trial counts (marked as both saturated). Over loopback the
    two sides pay the kernel's TCP path symmetrically, so a fast server and the generator reach
    their limits together."""
    lj = (rec.get("load") or {}).get("stdout_json") or {}
    if rec["status"] != "ok" or not lj.get("invalid"):
        return
    gen = lj.get("generator_cpu_pct")
    # Older generators give only "invalid"; treat that as behind schedule.
    behind = lj.get("behind_schedule", not lj.get("generator_saturated"))
    server = rec["metrics"].get("cpu_pct_total")
    limit = SERVER_BUSY_PCT * server_cores
    if behind:
        rec["status"] = "invalid"
        rec["problems"].append(f"generator fell behind its schedule by "
                               f"{lj.get('behind_schedule_max_ms', 0):.1f} ms")
    elif server is not None and server >= limit:
        rec["saturated"] = {"server_cpu_pct": round(server, 1), "generator_cpu_pct": gen}
    else:
        rec["status"] = "invalid"
        seen = "not measured" if server is None else f"{server:.0f}%"
        rec["problems"].append(f"generator saturated ({gen}% of its CPU) while the server used "
                               f"{seen} of its {server_cores} core(s): the generator set the figure")


def _cpu_unmeasured(rec: dict) -> str | None:
    """Why the server's CPU is not a figure, or None. Only a cgroup counts every task exactly;
    the /proc walk (cgroup kind "proc") reads whole clock ticks of the processes it still
    finds, so a zero from it means "not seen", never "no CPU" (a server that served any
    message used some)."""
    tot, cg = rec.get("totals") or {}, rec.get("cgroup") or {}
    if not tot.get("wall_s") or cg.get("exact_cpu", True) or tot.get("cpu_s", 0) > 0:
        return None
    return ("the server's CPU could not be measured on its host: the /proc walk read 0 s "
            f"({cg.get('note', 'no cgroup')})")


def _metrics(rec: dict) -> dict[str, float]:
    m: dict[str, float] = {}
    samples = rec.get("samples", [])
    mean, cv = cpu_mean_cv([s["cpu_pct"] for s in samples])
    m["cpu_mean_pct"], m["cpu_cv"] = mean, cv
    tot = rec.get("totals", {})
    unmeasured = _cpu_unmeasured(rec)
    if unmeasured:
        rec["cpu_unmeasured"] = unmeasured
    if tot.get("wall_s") and not unmeasured:
        m["cpu_s"] = tot["cpu_s"]
        m["cpu_pct_total"] = 100.0 * tot["cpu_s"] / tot["wall_s"]
        # read(2) calls per second from /proc/PID/io syscr, over the window up to the sample
        # where the count was highest (sampler.py says why).
        if isinstance(tot.get("read_syscalls"), int) and tot.get("read_syscalls_s"):
            m["reads_per_s"] = tot["read_syscalls"] / tot["read_syscalls_s"]
    # Exact totals: wait4() gives the server's own threads plus every descendant it reaped.
    ru = rec.get("rusage")
    if ru is not None:
        m["ctx_voluntary"] = float(ru["nvcsw"])
        m["ctx_involuntary"] = float(ru["nivcsw"])
    mems = [s["mem_bytes"] for s in samples if s.get("mem_bytes") is not None]
    if tot.get("mem_peak_bytes"):
        mems.append(tot["mem_peak_bytes"])
    if mems:
        m["mem_max_mib"] = max(mems) / 2**20
    pss = [s["pss_bytes"] for s in samples if s.get("pss_bytes")]
    if tot.get("pss_bytes_end"):
        pss.append(tot["pss_bytes_end"])
    if pss:
        m["pss_max_mib"] = max(pss) / 2**20
    tasks = [s["tasks"] for s in samples]
    if tasks:
        m["tasks_max"] = float(max(tasks))
    lj = (rec.get("load") or {}).get("stdout_json") or {}
    for k in ("throughput_per_s", "achieved_rate", "errors", "generator_cpu_pct",
              "behind_schedule_max_ms"):
        if isinstance(lj.get(k), (int, float)) and not isinstance(lj.get(k), bool):
            m[k] = float(lj[k])
    lat = lj.get("latency_us") or {}
    for k in ("p50", "p99", "p999", "mean"):
        if isinstance(lat.get(k), (int, float)):
            m[f"latency_{k}_us"] = float(lat[k])
    if "cpu_s" in m and lj.get("messages"):
        m["cpu_us_per_msg"] = 1e6 * m["cpu_s"] / float(lj["messages"])
    # A load that measures more than yard-load's fields (a script around it) gives its own
    # figures in a "metrics" object: every number in it is a metric under its own name
    # (nested keys joined with "."); it cannot replace one measured above.
    extra = lj.get("metrics")
    if isinstance(extra, dict):
        for k, v in _flat_numbers(extra).items():
            m.setdefault(k, v)
    return {k: v for k, v in m.items() if v == v}  # drop NaN (e.g. Cv of a too-short series)


def environment(repo: Path, bin_dir: Path) -> dict:
    def rd(p: str) -> str | None:
        try:
            return Path(p).read_text().strip()
        except OSError:
            return None

    cpu_model = None
    for line in (rd("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break

    def cmd(argv: list[str]) -> str | None:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=5,
                                  cwd=repo).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            return None

    return {
        "kernel": platform.release(),
        "uname": " ".join(platform.uname()),
        "cpu_model": cpu_model,
        "cpus_online": os.cpu_count(),
        "governor": rd("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "git_commit": cmd(["git", "rev-parse", "HEAD"]),
        "git_dirty": bool(cmd(["git", "status", "--porcelain", "--untracked-files=no"])),
        "python": platform.python_version(),
        "yard_harness": __version__,
        "gcc": (cmd(["gcc", "--version"]) or "").split("\n")[0] or None,
        "bin_dir": str(bin_dir),
    }


def plan(experiments: list[Experiment], seed: int) -> list[Trial]:
    """Every trial of every experiment; within a repetition, the order is shuffled across
    alternatives and sweep points so no alternative runs as one block."""
    rng = random.Random(seed)
    trials: list[Trial] = []
    for e in experiments:
        for rep in range(e.repetitions):
            block = [Trial(e, a, p, rep) for a, p in e.runs()]
            rng.shuffle(block)
            trials.extend(block)
    return trials


def _point_key(point: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "-"


class AdaptivePlan:
    """One experiment's trials, in rounds (docs/harness.md, "Adaptive repetitions").

    Each round runs every (alternative, point) still open once, in a shuffled order, so the
    alternatives stay interleaved as in plan(). After a round, record() has fed each trial's
    watched metric in and close() applies the stopping rule: an alternative stops at a point
    once it has the experiment's minimum of repetitions and the bootstrap CI of its ratio to
    the reference there is within ±ci_width, or once it has max_repetitions. The reference
    runs as long as any other alternative at its point does (their ratios need its trials);
    where it does not run, an alternative's own median CI must be narrow. With max_repetitions
    unset this is plan()'s fixed count."""

    def __init__(self, exp: Experiment, rng: random.Random):
        self.exp, self.rng = exp, rng
        self.metric = exp.watched_metric()
        self.ref = exp.reference()
        self.runs = exp.runs()
        self.keys = [(a.label, _point_key(p)) for a, p in self.runs]
        self.values: dict[tuple[str, str], list[float]] = {k: [] for k in self.keys}
        self.count: dict[tuple[str, str], int] = {k: 0 for k in self.keys}
        self.stops: dict[tuple[str, str], Stop] = {}
        self.rounds = 0

    def open(self) -> list[tuple[Alternative, dict[str, Any]]]:
        return [(a, p) for (a, p), k in zip(self.runs, self.keys) if k not in self.stops]

    def next_round(self) -> list[Trial]:
        block = [Trial(self.exp, a, p, self.count[(a.label, _point_key(p))])
                 for a, p in self.open()]
        self.rng.shuffle(block)
        self.rounds += 1
        return block

    def record(self, t: Trial, rec: dict) -> None:
        k = (t.alt.label, _point_key(t.point))
        self.count[k] += 1
        v = (rec.get("metrics") or {}).get(self.metric)
        if rec.get("status") == "ok" and isinstance(v, (int, float)):
            self.values[k].append(float(v))

    def close(self) -> None:
        """The stopping rule after a round."""
        e = self.exp
        lo, hi, width = e.repetitions, e.max_reps(), e.ci_width
        refs = {pk for (label, pk) in self.keys if label == self.ref}
        for k in self.keys:
            label, pk = k
            if k in self.stops or label == self.ref and pk in refs:
                continue
            ref = self.values[(self.ref, pk)] if pk in refs else None
            st = stop_rule(self.values[k], ref, self.count[k], lo, hi, width)
            if st.done:
                self.stops[k] = st
        for pk in refs:
            k = (self.ref, pk)
            if k in self.stops:
                continue
            others = [o for o in self.keys if o[1] == pk and o[0] != self.ref]
            if not others:
                st = stop_rule(self.values[k], None, self.count[k], lo, hi, width)
                if st.done:
                    self.stops[k] = st
            elif all(o in self.stops for o in others) and self.count[k] >= lo:
                self.stops[k] = Stop(True, "reference", self.count[k], float("nan"),
                                     f"{self.count[k]} trials: the reference, run as long as "
                                     "the others at this point")
            elif self.count[k] >= hi:
                fixed = hi <= lo
                self.stops[k] = Stop(True, "fixed" if fixed else "max", self.count[k],
                                     float("nan"), f"{self.count[k]} trial(s): " +
                                     ("a fixed count" if fixed else "the maximum"))

    def finished(self) -> bool:
        return all(k in self.stops for k in self.keys)

    def trials_done(self) -> int:
        return sum(self.count.values())

    def trials_left_min(self) -> int:
        """Trials still to run if every open point stopped at its next chance."""
        lo = self.exp.repetitions
        return sum(max(lo - self.count[k], 1 if k not in self.stops else 0)
                   for k in self.keys if k not in self.stops)

    def trials_max(self) -> int:
        return len(self.keys) * self.exp.max_reps()

    def summary(self) -> list[dict]:
        """Per (alternative, point): trials and why it stopped, for meta.json and the report."""
        out = []
        for (label, pk) in self.keys:
            st = self.stops.get((label, pk)) or Stop(False, "unfinished", self.count[(label, pk)],
                                                    float("nan"), "unfinished")
            out.append({"experiment": self.exp.name, "alternative": label, "point": pk,
                        "metric": self.metric, "reference": self.ref, **st.as_dict()})
        return out
