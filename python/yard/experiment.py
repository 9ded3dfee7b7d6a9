"""Experiments and suites as data: loading and validating experiments/*.toml.

See docs/harness.md for the schema. Every error names the file and the field.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("server", "tool")
SUITES = ("smoke", "quick", "full")


class SchemaError(ValueError):
    pass


@dataclass
class Alternative:
    label: str
    argv: list[str]          # server argv (kind=server) or tool argv (kind=tool), templated
    model: str | None = None
    runtime: str | None = None  # kind=tool: the name tool.list_runtimes must say is available
    needs: str | None = None    # a yard-serve model whose availability this server shares


@dataclass
class Experiment:
    path: Path
    name: str
    title: str
    kind: str
    description: str
    alternatives: list[Alternative]
    load: list[str]                       # workload argv template (kind=server)
    sweep: dict[str, list[Any]]
    duration: float
    warmup: float
    repetitions: int
    sample_interval: float
    server_cpus: list[int]
    load_cpus: list[int]
    plots: list[str]
    baseline: str | None
    app: str | None = None
    log_y: bool = False                   # report: logarithmic value axis
    bars_at: dict[str, Any] | None = None  # report: an extra bar chart of one sweep point
    table: list[str] = field(default_factory=list)  # report: table columns (default: all)
    suites: dict[str, dict] = field(default_factory=dict)
    timeout: float = 120.0
    load_reserve: int = 1                 # CPUs kept for the local generator in a CPU sweep
    skip: bool = False                    # the suite leaves this experiment out
    # report: every alternative is also divided by each of these (report.baseline as a list;
    # baseline is its first)
    baselines: list[str] = field(default_factory=list)
    # report: named pairs shown side by side, each {"label", "alternative", "baseline"}
    pairs: list[dict[str, str]] = field(default_factory=list)
    note: str = ""                        # report: a section of text after the tables
    # kind=tool: pin each trial to the first N allowed CPUs, N = the point's value of this
    # sweep variable (e.g. "workers"); otherwise the tool runs on run.load_cpus
    cpus_from: str | None = None
    # trials not run: [[exclude]] tables (conditions on the point, optional alternatives)
    exclude: list[dict[str, Any]] = field(default_factory=list)
    # kind=tool: argv printing the runtimes as JSON [{name, available, reason}], templated
    list_runtimes: list[str] | None = None
    # report: [[report.figures]], each {metric, x, where, speedup, title, log_y}
    figures: list[dict[str, Any]] = field(default_factory=list)
    # Adaptive repetitions: `repetitions` is the minimum; an alternative is repeated at a point
    # until its ratio to the reference has a CI half-width of at most ci_width (a share of the
    # ratio) or it has max_repetitions trials (None: = repetitions, a fixed count).
    max_repetitions: int | None = None
    ci_width: float = 0.05
    stop_metric: str | None = None        # the metric the rule watches (default: plots[0])
    question: str = ""                    # report: the verdict row's question, in a few words
    verdict_at: dict[str, Any] | None = None  # report: the point the verdict ranks at

    def max_reps(self) -> int:
        return max(self.repetitions, self.max_repetitions or self.repetitions)

    def watched_metric(self) -> str:
        """The metric the stopping rule and the verdict use."""
        if self.stop_metric:
            return self.stop_metric
        if self.plots:
            return self.plots[0]
        return "throughput_per_s" if self.kind == "server" else "median_s"

    def reference(self) -> str | None:
        """The alternative every other one is divided by: the first of report.baseline that
        runs here (one may have been skipped as unavailable), else the first alternative."""
        labels = [a.label for a in self.alternatives]
        for b in self.baselines or ([self.baseline] if self.baseline else []):
            if b in labels:
                return b
        return labels[0] if labels else None

    def points(self) -> list[dict[str, Any]]:
        keys = list(self.sweep)
        if not keys:
            return [{}]
        return [dict(zip(keys, combo)) for combo in itertools.product(*(self.sweep[k] for k in keys))]

    def excluded(self, label: str, point: dict[str, Any]) -> bool:
        """Whether an [[exclude]] table takes this alternative at this point out."""
        return any(("alternatives" not in x or label in x["alternatives"])
                   and point_matches(point, x) for x in self.exclude)

    def runs(self) -> list[tuple[Alternative, dict[str, Any]]]:
        """Every (alternative, point) a repetition runs: the sweep minus the exclusions."""
        return [(a, p) for p in self.points() for a in self.alternatives
                if not self.excluded(a.label, p)]

    def tool_cpus(self, point: dict[str, Any], allowed: set[int]) -> set[int]:
        """A tool's CPUs: the first N allowed with cpus_from, else run.load_cpus (as far as
        they are allowed here)."""
        if self.cpus_from and self.cpus_from in point:
            return set(sorted(allowed)[:point[self.cpus_from]])
        return set(self.load_cpus) & allowed

    def in_suite(self, suite: str) -> bool:
        if self.suites.get(suite, {}).get("skip"):
            return False
        return suite in ("quick", "full") or suite in self.suites

    def placement(self, point: dict[str, Any], allowed: set[int]) -> tuple[set[int], set[int]]:
        """The server's and the local generator's CPUs for one point. In a server_cpus sweep
        the server takes the first N allowed CPUs and the generator every other one; otherwise
        both are the [run] lists (as far as they are allowed here)."""
        if CPU_SWEEP in point:
            cpus = sorted(allowed)
            n = point[CPU_SWEEP]
            return set(cpus[:n]), set(cpus[n:]) or set(cpus[:1])
        return set(self.server_cpus) & allowed, set(self.load_cpus) & allowed

    def drop_cpu_points(self, ncpus: int) -> list[dict[str, Any]]:
        """Take out of a server_cpus sweep the counts this machine cannot give the server with
        load_reserve CPUs kept for the generator; returns what was dropped, with why."""
        if self.cpus_from:
            want = self.sweep.get(self.cpus_from) or []
            gone = [n for n in want if n > ncpus]
            if gone and len(gone) < len(want):
                self.sweep[self.cpus_from] = [n for n in want if n <= ncpus]
                return [{"experiment": self.name, self.cpus_from: gone,
                         "reason": f"{self.cpus_from} = {', '.join(map(str, gone))} not run: "
                                   f"{ncpus} CPU(s) here"}]
            return []
        want = self.sweep.get(CPU_SWEEP)
        if not want:
            return []
        cap = max(1, ncpus - self.load_reserve)
        gone = [n for n in want if n > cap]
        self.sweep[CPU_SWEEP] = [n for n in want if n <= cap]
        if not gone:
            return []
        return [{"experiment": self.name, CPU_SWEEP: gone,
                 "reason": f"{CPU_SWEEP} = {', '.join(map(str, gone))} not run: {ncpus} CPU(s) "
                           f"here, {self.load_reserve} kept for the load generator, so at most "
                           f"{cap} for the server"}]

    def for_suite(self, suite: str) -> "Experiment":
        """A copy with the suite's overrides applied (full = the file's own values)."""
        e = copy.deepcopy(self)
        ov = self.suites.get(suite, {})
        for k in ("duration", "warmup", "repetitions", "sample_interval", "timeout", "skip",
                  "max_repetitions", "ci_width", "stop_metric"):
            if k in ov:
                setattr(e, k, ov[k])
        if "sweep" in ov:
            e.sweep.update(ov["sweep"])
        e.exclude = e.exclude + ov.get("exclude", [])
        if "models" in ov:
            keep = set(ov["models"])
            e.alternatives = [a for a in e.alternatives if a.label in keep or a.model in keep]
        return e

    def trial_seconds(self) -> float:
        return self.warmup + self.duration + 1.0

    def estimate_seconds(self) -> float:
        return len(self.runs()) * self.repetitions * self.trial_seconds()


def _err(path: Path, fieldname: str, msg: str) -> SchemaError:
    return SchemaError(f"{path}: field '{fieldname}': {msg}")


def _get(d: dict, key: str, typ, path: Path, prefix: str, default=None, required=False):
    full = f"{prefix}.{key}" if prefix else key
    if key not in d:
        if required:
            raise _err(path, full, "is required")
        return default
    v = d[key]
    if typ is float and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if not isinstance(v, typ) or isinstance(v, bool) and typ is not bool:
        tname = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise _err(path, full, f"must be a {tname}, got {type(v).__name__} {v!r}")
    return v


def _str_list(v, path: Path, full: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise _err(path, full, "must be a list of strings")
    return v


def _int_list(v, path: Path, full: str) -> list[int]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise _err(path, full, "must be a list of integers (CPU numbers)")
    return v


_TOP = {"experiment", "servers", "tool", "load", "sweep", "run", "report", "suites", "exclude"}
_RUN = {"duration", "warmup", "repetitions", "sample_interval", "server_cpus", "load_cpus", "timeout",
        "load_reserve", "cpus_from", "max_repetitions", "ci_width", "stop_metric"}
_SUITE = _RUN - {"server_cpus", "load_cpus", "load_reserve", "cpus_from"} | {"sweep", "models", "skip",
                                                                             "exclude"}
_COMPARE = {"gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
            "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}


def point_matches(point: dict[str, Any], cond: dict[str, Any]) -> bool:
    """Whether a point meets every condition of a table (keys other than sweep variables,
    like alternatives and reason, are ignored): a value is equality, a list membership, a
    table of gt/ge/lt/le bounds, all of which must hold."""
    for k, want in cond.items():
        if k in ("alternatives", "reason"):
            continue
        v = point.get(k)
        if isinstance(want, dict):
            if v is None or not all(_COMPARE[op](v, b) for op, b in want.items()):
                return False
        elif isinstance(want, list):
            if v not in want:
                return False
        elif v != want:
            return False
    return True


def describe_condition(cond: dict[str, Any]) -> str:
    """A table of conditions in words, e.g. 'threads where cutoff = 0 and n > 20'."""
    sym = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    parts = []
    for k, want in cond.items():
        if k in ("alternatives", "reason"):
            continue
        if isinstance(want, dict):
            parts += [f"{k} {sym[op]} {b}" for op, b in want.items()]
        elif isinstance(want, list):
            parts.append(f"{k} in {{{', '.join(map(str, want))}}}")
        else:
            parts.append(f"{k} = {want}")
    who = ", ".join(cond.get("alternatives", [])) or "every alternative"
    return who + (" where " + " and ".join(parts) if parts else "")


def ncpu_here() -> int:
    """The CPUs this process may run on (its affinity mask, as taskset or a cgroup set it)."""
    return len(os.sched_getaffinity(0))


_RANGE = re.compile(r"^\s*(\d+|ncpu)\s*\.\.\s*(\d+|ncpu)\s*$")


def expand_values(v: Any, ncpu: int, path: Path, full: str) -> list[Any]:
    """A sweep's values with the machine's CPU count filled in: "A..B" is the integers A to B
    (either end may be "ncpu"), and "ncpu" in a list is the count; duplicates are dropped."""
    if isinstance(v, str):
        m = _RANGE.match(v)
        if not m:
            raise _err(path, full, f"must be a list of values or a range \"A..B\" (an end may be "
                       f"ncpu), got {v!r}")
        lo, hi = (ncpu if x == "ncpu" else int(x) for x in m.groups())
        if lo > hi:
            raise _err(path, full, f"range {v!r} is empty here ({ncpu} CPU(s))")
        return list(range(lo, hi + 1))
    if not isinstance(v, list) or not v:
        raise _err(path, full, "must be a non-empty list of values")
    out: list[Any] = []
    for x in v:
        x = ncpu if x == "ncpu" else x
        if x not in out:
            out.append(x)
    return out


def _conditions(v: Any, sweep: dict, labels: list[str], path: Path, full: str,
                extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Validate a table of point conditions (an [[exclude]] or a figure's where)."""
    if not isinstance(v, dict):
        raise _err(path, full, "must be a table of conditions on sweep variables")
    for k, want in v.items():
        if k in extra:
            continue
        if k == "alternatives":
            names = _str_list(want, path, f"{full}.alternatives")
            for a in names:
                if a not in labels:
                    raise _err(path, f"{full}.alternatives", f"{a!r} is not one of the "
                               f"alternatives {labels}")
        elif k == "reason":
            _get(v, k, str, path, full)
        elif k not in sweep:
            raise _err(path, f"{full}.{k}", f"is not a sweep variable; known: {sorted(sweep)}")
        elif isinstance(want, dict):
            for op, b in want.items():
                if op not in _COMPARE or isinstance(b, bool) or not isinstance(b, (int, float)):
                    raise _err(path, f"{full}.{k}", "a table of bounds takes gt, ge, lt, le with "
                               f"numbers, got {op} = {b!r}")
        elif isinstance(want, list) and not want:
            raise _err(path, f"{full}.{k}", "must be a non-empty list")
    return v

# The sweep variable that gives the server a number of CPUs (see docs/harness.md, CPU sweep).
CPU_SWEEP = "server_cpus"


def _known_fields(table: dict, allowed, path: Path, pre: str) -> None:
    """A table may hold only the allowed fields: the first other one is an error."""
    for k in table:
        if k not in allowed:
            raise _err(path, f"{pre}.{k}", f"unknown field; expected one of {sorted(allowed)}")


def load_experiment(path: Path, models: list | None = None, ncpu: int | None = None) -> Experiment:
    """models: the names yard-serve offers, or its --list-models --json entries (then the models
    whose flags say they take --workers follow a server_cpus sweep). ncpu: the CPU count a sweep's
    "ncpu" stands for (default: this process's affinity mask)."""
    path = Path(path)
    ncpu = ncpu or ncpu_here()
    names = [m if isinstance(m, str) else m["name"] for m in models or []]
    scalable = {m["name"] for m in models or [] if isinstance(m, dict)
                and (m.get("flags") or {}).get("workers")}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise SchemaError(f"{path}: not valid TOML: {e}") from None
    for k in data:
        if k not in _TOP:
            raise _err(path, k, f"unknown table; expected one of {sorted(_TOP)}")
    exp = _get(data, "experiment", dict, path, "", required=True)
    name = _get(exp, "name", str, path, "experiment", default=path.stem)
    title = _get(exp, "title", str, path, "experiment", default=name)
    kind = _get(exp, "kind", str, path, "experiment", default="server")
    if kind not in KINDS:
        raise _err(path, "experiment.kind", f"must be one of {KINDS}, got {kind!r}")
    description = _get(exp, "description", str, path, "experiment", default="")
    question = _get(exp, "question", str, path, "experiment", default="")

    alts: list[Alternative] = []
    load: list[str] = []
    app = None
    list_runtimes = None
    if kind == "server":
        srv = _get(data, "servers", dict, path, "", required=True)
        app = _get(srv, "app", str, path, "servers")
        flags = _str_list(srv.get("flags", []), path, "servers.flags")
        # "tls": the models listen with --tls-listen (servers.flags give the certificate);
        # the load's {target} is then tls:HOST:PORT.
        listen = _get(srv, "listen", str, path, "servers", default="plain")
        if listen not in ("plain", "tls"):
            raise _err(path, "servers.listen", f"must be 'plain' or 'tls', got {listen!r}")
        listen_flag = "--tls-listen" if listen == "tls" else "--listen"
        mlist = srv.get("models", [])
        if mlist == "all":
            mlist = list(names)
        mlist = _str_list(mlist, path, "servers.models")
        if mlist and not app:
            raise _err(path, "servers.app", "is required when servers.models is given")
        for m in mlist:
            alts.append(Alternative(m, ["{bin}/yard-serve", "--app", app, "--model", m,
                                        listen_flag, "127.0.0.1:0", *flags], model=m))
        extra = srv.get("extra", [])
        if not isinstance(extra, list):
            raise _err(path, "servers.extra", "must be an array of tables [[servers.extra]]")
        for i, x in enumerate(extra):
            pre = f"servers.extra[{i}]"
            if not isinstance(x, dict):
                raise _err(path, pre, "must be a table with label and argv")
            label = _get(x, "label", str, path, pre, required=True)
            argv = _str_list(_get(x, "argv", list, path, pre, required=True), path, pre + ".argv")
            alts.append(Alternative(label, argv, model=_get(x, "model", str, path, pre),
                                    needs=_get(x, "needs", str, path, pre)))
        if not alts:
            raise _err(path, "servers", "declares no server: give servers.models or [[servers.extra]]")
        ld = _get(data, "load", dict, path, "", required=True)
        load = _str_list(_get(ld, "argv", list, path, "load", required=True), path, "load.argv")
        if not any("{target}" in a for a in load):
            raise _err(path, "load.argv", "must contain the placeholder {target}")
    else:
        tool = _get(data, "tool", dict, path, "", required=True)
        variants = tool.get("variants")
        if variants is None:
            argv = _str_list(_get(tool, "argv", list, path, "tool", required=True), path, "tool.argv")
            alts.append(Alternative(_get(tool, "label", str, path, "tool", default=name), argv))
        else:
            if not isinstance(variants, list) or not variants:
                raise _err(path, "tool.variants", "must be a non-empty array of tables")
            for i, x in enumerate(variants):
                pre = f"tool.variants[{i}]"
                label = _get(x, "label", str, path, pre, required=True)
                argv = _str_list(_get(x, "argv", list, path, pre, required=True), path, pre + ".argv")
                _known_fields(x, ("label", "argv", "runtime"), path, pre)
                alts.append(Alternative(label, argv,
                                        runtime=_get(x, "runtime", str, path, pre)))
        list_runtimes = tool.get("list_runtimes")
        if list_runtimes is not None:
            list_runtimes = _str_list(list_runtimes, path, "tool.list_runtimes")
        if any(a.runtime for a in alts) and not list_runtimes:
            raise _err(path, "tool.list_runtimes", "is required when a variant names a runtime "
                       "(the command that says which runtimes this machine has)")

    labels = [a.label for a in alts]
    if len(set(labels)) != len(labels):
        raise _err(path, "servers", f"alternative labels must be unique, got {labels}")

    sweep = _get(data, "sweep", dict, path, "", default={})
    for k, v in sweep.items():
        sweep[k] = expand_values(v, ncpu, path, f"sweep.{k}")
    if CPU_SWEEP in sweep:
        v = sweep[CPU_SWEEP]
        if kind != "server" or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                                       for x in v):
            raise _err(path, f"sweep.{CPU_SWEEP}", "must be a list of CPU counts >= 1, in a "
                       "server experiment")
        # A model with several loops follows the count; the others are only pinned to the CPUs.
        for a in alts:
            if a.model in scalable and "--workers" not in a.argv:
                a.argv += ["--workers", "{" + CPU_SWEEP + "}"]

    run = _get(data, "run", dict, path, "", default={})
    _known_fields(run, _RUN, path, "run")
    duration = _get(run, "duration", float, path, "run", default=10.0)
    warmup = _get(run, "warmup", float, path, "run", default=0.0)
    reps = _get(run, "repetitions", int, path, "run", default=3)
    interval = _get(run, "sample_interval", float, path, "run", default=0.5)
    timeout = _get(run, "timeout", float, path, "run", default=120.0)
    if duration <= 0:
        raise _err(path, "run.duration", "must be > 0 seconds")
    if warmup < 0:
        raise _err(path, "run.warmup", "must be >= 0 seconds")
    if reps < 1:
        raise _err(path, "run.repetitions", "must be >= 1")
    if not 0.01 <= interval <= 60:
        raise _err(path, "run.sample_interval", "must be between 0.01 and 60 seconds")
    max_reps = _get(run, "max_repetitions", int, path, "run")
    ci_width = _get(run, "ci_width", float, path, "run", default=0.05)
    stop_metric = _get(run, "stop_metric", str, path, "run")
    _check_adaptive(path, "run", reps, max_reps, ci_width)
    scpus = _int_list(run.get("server_cpus", [0]), path, "run.server_cpus")
    lcpus = _int_list(run.get("load_cpus", [1]), path, "run.load_cpus")
    reserve = _get(run, "load_reserve", int, path, "run", default=1)
    if reserve < 0:
        raise _err(path, "run.load_reserve", "must be >= 0 CPUs")
    cpus_from = _get(run, "cpus_from", str, path, "run")
    if cpus_from is not None:
        if kind != "tool" or cpus_from not in sweep or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in sweep[cpus_from]):
            raise _err(path, "run.cpus_from", "must name a sweep variable of CPU counts >= 1, in a "
                       "tool experiment")

    exclude = data.get("exclude", [])
    if not isinstance(exclude, list):
        raise _err(path, "exclude", "must be an array of tables [[exclude]]")
    for i, x in enumerate(exclude):
        _conditions(x, sweep, labels, path, f"exclude[{i}]")

    known = {"bin", "duration", "load_threads", "pki", *sweep}
    for a in alts:
        bad = placeholders(a.argv) - known
        if bad:
            where = "tool" if kind == "tool" else "servers"
            raise _err(path, where, f"alternative {a.label!r} uses unknown placeholder(s) "
                       f"{sorted(bad)}; known: {sorted(known)}")
    bad = placeholders(load) - known - {"target"}
    if bad:
        raise _err(path, "load.argv", f"unknown placeholder(s) {sorted(bad)}; "
                   f"known: {sorted(known | {'target'})}")

    rep = _get(data, "report", dict, path, "", default={})
    plots = _str_list(rep.get("plots", []), path, "report.plots")
    bl = rep.get("baseline")
    if isinstance(bl, list):
        baselines = _str_list(bl, path, "report.baseline")
        if not baselines:
            raise _err(path, "report.baseline", "must name at least one alternative")
    else:
        one = _get(rep, "baseline", str, path, "report")
        baselines = [one] if one is not None else []
    for b in baselines:
        if b not in labels:
            raise _err(path, "report.baseline", f"{b!r} is not one of the alternatives {labels}")
    baseline = baselines[0] if baselines else None
    pairs = rep.get("pairs", [])
    if not isinstance(pairs, list):
        raise _err(path, "report.pairs", "must be an array of tables [[report.pairs]]")
    for i, pr in enumerate(pairs):
        pre = f"report.pairs[{i}]"
        if not isinstance(pr, dict):
            raise _err(path, pre, "must be a table with label, alternative and baseline")
        _known_fields(pr, ("label", "alternative", "baseline"), path, pre)
        _get(pr, "label", str, path, pre, required=True)
        for k in ("alternative", "baseline"):
            v = _get(pr, k, str, path, pre, required=True)
            if v not in labels:
                raise _err(path, f"{pre}.{k}", f"{v!r} is not one of the alternatives {labels}")
    note = _get(rep, "note", str, path, "report", default="")

    figures = rep.get("figures", [])
    if not isinstance(figures, list):
        raise _err(path, "report.figures", "must be an array of tables [[report.figures]]")
    for i, fg in enumerate(figures):
        pre = f"report.figures[{i}]"
        if not isinstance(fg, dict):
            raise _err(path, pre, "must be a table with at least a metric")
        _known_fields(fg, ("metric", "x", "where", "speedup", "title", "log_y"), path, pre)
        _get(fg, "metric", str, path, pre, required=True)
        _get(fg, "title", str, path, pre)
        _get(fg, "speedup", bool, path, pre)
        _get(fg, "log_y", bool, path, pre)
        x = _get(fg, "x", str, path, pre, default=next(iter(sweep), None))
        if x not in sweep:
            raise _err(path, f"{pre}.x", f"must be a sweep variable; known: {sorted(sweep)}")
        fg["x"] = x
        _conditions(fg.get("where", {}), sweep, labels, path, f"{pre}.where")
    log_y = _get(rep, "log_y", bool, path, "report", default=False)
    table = _str_list(rep.get("table", []), path, "report.table")
    bars_at = _get(rep, "bars_at", dict, path, "report")
    if bars_at is not None:
        for k, v in bars_at.items():
            if k not in sweep:
                raise _err(path, f"report.bars_at.{k}", f"is not a sweep key; known: {sorted(sweep)}")
            if v not in sweep[k]:
                raise _err(path, f"report.bars_at.{k}", f"{v!r} is not one of sweep.{k} {sweep[k]}")
    verdict_at = _get(rep, "verdict_at", dict, path, "report")
    for k, v in (verdict_at or {}).items():
        if k not in sweep:
            raise _err(path, f"report.verdict_at.{k}", f"is not a sweep key; known: {sorted(sweep)}")
    _known_fields(rep, ("plots", "baseline", "log_y", "bars_at", "table", "pairs", "note", "figures",
                        "verdict_at"), path, "report")

    suites = _get(data, "suites", dict, path, "", default={})
    for sname, ov in suites.items():
        if sname not in SUITES:
            raise _err(path, f"suites.{sname}", f"unknown suite; expected one of {SUITES}")
        if not isinstance(ov, dict):
            raise _err(path, f"suites.{sname}", "must be a table")
        _known_fields(ov, _SUITE, path, f"suites.{sname}")
        for k, v in ov.items():
            if k == "sweep":
                if not isinstance(v, dict):
                    raise _err(path, f"suites.{sname}.sweep", "must be a table")
                for sk, sv in v.items():
                    if sk not in sweep:
                        raise _err(path, f"suites.{sname}.sweep.{sk}", "is not a sweep variable of [sweep]")
                    v[sk] = expand_values(sv, ncpu, path, f"suites.{sname}.sweep.{sk}")
            elif k == "exclude":
                if not isinstance(v, list):
                    raise _err(path, f"suites.{sname}.exclude", "must be an array of tables")
                for i, x in enumerate(v):
                    _conditions(x, sweep, labels, path, f"suites.{sname}.exclude[{i}]")
            elif k == "models":
                _str_list(v, path, f"suites.{sname}.models")
            elif k == "skip":
                _get(ov, k, bool, path, f"suites.{sname}")
            elif k in ("repetitions", "max_repetitions"):
                _get(ov, k, int, path, f"suites.{sname}")
            elif k == "stop_metric":
                _get(ov, k, str, path, f"suites.{sname}")
            else:
                _get(ov, k, float, path, f"suites.{sname}")

        _check_adaptive(path, f"suites.{sname}", ov.get("repetitions", reps),
                        ov.get("max_repetitions", max_reps), ov.get("ci_width", ci_width))

    return Experiment(path=path, name=name, title=title, kind=kind, description=description,
                      alternatives=alts, load=load, sweep=sweep, duration=duration, warmup=warmup,
                      repetitions=reps, sample_interval=interval, server_cpus=scpus,
                      load_cpus=lcpus, plots=plots, baseline=baseline, app=app, suites=suites,
                      log_y=log_y, bars_at=bars_at, table=table,
                      timeout=timeout, load_reserve=reserve, baselines=baselines, pairs=pairs,
                      note=note, cpus_from=cpus_from, exclude=exclude,
                      list_runtimes=list_runtimes, figures=figures, max_repetitions=max_reps,
                      ci_width=ci_width, stop_metric=stop_metric, question=question,
                      verdict_at=verdict_at)


def load_all(directory: Path, models: list | None = None, ncpu: int | None = None) -> list[Experiment]:
    return [load_experiment(p, models, ncpu) for p in sorted(Path(directory).glob("*.toml"))]


def _check_adaptive(path: Path, pre: str, reps: int, max_reps: int | None, width: float) -> None:
    if max_reps is not None and max_reps < reps:
        raise _err(path, f"{pre}.max_repetitions", f"must be >= repetitions ({reps}), the "
                   f"minimum, got {max_reps}")
    if not 0 < width < 1:
        raise _err(path, f"{pre}.ci_width", f"must be a share between 0 and 1 (0.05 = ±5%), "
                   f"got {width}")


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(argv: list[str]) -> set[str]:
    return {m.group(1) for a in argv for m in _PLACEHOLDER.finditer(a)}


def render(argv: list[str], values: dict[str, Any]) -> list[str]:
    """Substitute {name} placeholders (other braces are left alone); an unknown name is an error."""
    def sub(m: re.Match) -> str:
        if m.group(1) not in values:
            raise SchemaError(f"unknown placeholder {{{m.group(1)}}}; known: {sorted(values)}")
        return _fmt(values[m.group(1)])
    return [_PLACEHOLDER.sub(sub, a) for a in argv]


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
