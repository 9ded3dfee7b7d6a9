"""The `yard` command: bench, run, report, list, loc, rig."""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from . import loc, rig
from .distributed import run_trial_hosts
from .experiment import (SUITES, Experiment, SchemaError, describe_condition, load_all,
                         load_experiment, render)
from .hosts import (HostError, Hosts, HostsFileError, check_build, load_hosts, manifest, on_each,
                    sync)
from .runner import AdaptivePlan, environment, run_trial


def find_repo() -> Path:
    """The repo root: from the package location (editable install) or else the cwd upwards."""
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for d in (start, *start.parents):
            if (d / "experiments").is_dir() and (d / "python" / "pyproject.toml").exists():
                return d
    return Path.cwd()


def list_models(bin_dir: Path) -> list[dict]:
    try:
        p = subprocess.run([str(bin_dir / "yard-serve"), "--list-models", "--json"],
                           capture_output=True, text=True, timeout=10)
        v = json.loads(p.stdout)
        return v if isinstance(v, list) else []
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return []


def skip_unavailable(exps: list[Experiment], models: list[dict], say) -> list[dict]:
    """Take out of each experiment the alternatives whose model yard-serve
    says cannot run here (io_uring refused by the kernel, ...), or that need
    what such a model needs (servers.extra's `needs`: rust-monoio needs
    io_uring as uring does), each said with its reason; returns what was
    skipped, for the report."""
    why = {m["name"]: m.get("unavailable_reason") or "unavailable"
           for m in models if m.get("available") is False}
    skipped = []
    for e in exps:
        keep = []
        for a in e.alternatives:
            if a.model in why:
                skipped.append({"experiment": e.name, "alternative": a.label,
                                "model": a.model, "reason": why[a.model]})
                say(f"yard: {e.name}: skipping {a.label}: --model {a.model} is unavailable "
                    f"here: {why[a.model]}")
            elif a.needs in why:
                reason = f"it needs what --model {a.needs} needs, unavailable here: {why[a.needs]}"
                skipped.append({"experiment": e.name, "alternative": a.label,
                                "model": a.model, "reason": reason})
                say(f"yard: {e.name}: skipping {a.label}: {reason}")
            else:
                keep.append(a)
        e.alternatives = keep
    return skipped


def list_runtimes(argv: list[str]) -> tuple[dict[str, str | None], str | None]:
    """Run a tool's list_runtimes command: {name: None if available, else why not}, or an
    error saying why the list could not be had. It prints a JSON list of {name, available,
    reason}, or an object holding that list as "runtimes"."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        v = json.loads(p.stdout)
        if isinstance(v, dict):
            v = v.get("runtimes")
        if p.returncode != 0 or not isinstance(v, list):
            raise ValueError(f"exit {p.returncode}: {p.stderr.strip()[-200:]}")
        return {r["name"]: None if r.get("available") else (r.get("reason") or "unavailable")
                for r in v if isinstance(r, dict) and "name" in r}, None
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        return {}, f"{' '.join(argv)} failed: {e}"


def skip_unavailable_runtimes(exps: list[Experiment], bin_dir: Path, say) -> list[dict]:
    """Take out of each tool experiment the variants whose runtime its tool.list_runtimes
    command says this machine lacks (a library not installed, ...), or all of them when the
    list cannot be had (the tool not built); each said with its reason, and returned for the
    report. Not a failure: the others run."""
    skipped = []
    for e in exps:
        if e.kind != "tool" or not e.list_runtimes:
            continue
        why, err = list_runtimes(render(e.list_runtimes, {"bin": str(bin_dir)}))
        keep = []
        for a in e.alternatives:
            reason = None
            if a.runtime:
                reason = err or (why[a.runtime] if a.runtime in why else
                                 f"not among the runtimes the tool lists ({', '.join(why)})")
            if reason:
                skipped.append({"experiment": e.name, "alternative": a.label,
                                "runtime": a.runtime, "reason": reason})
                say(f"yard: {e.name}: skipping {a.label}: runtime {a.runtime} is unavailable "
                    f"here: {reason}")
            else:
                keep.append(a)
        e.alternatives = keep
    return skipped


def _fmt_secs(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _exp_meta(e: Experiment, repo: Path) -> dict:
    try:
        rel = str(e.path.resolve().relative_to(repo))
    except ValueError:
        rel = str(e.path)
    return {"name": e.name, "title": e.title, "kind": e.kind, "description": e.description,
            "path": rel, "alternatives": [a.label for a in e.alternatives], "sweep": e.sweep,
            "duration": e.duration, "warmup": e.warmup, "repetitions": e.repetitions,
            "sample_interval": e.sample_interval, "plots": e.plots, "baseline": e.baseline,
            "log_y": e.log_y, "bars_at": e.bars_at, "table": e.table,
            "baselines": e.baselines, "pairs": e.pairs, "note": e.note,
            "figures": e.figures, "cpus_from": e.cpus_from,
            "excluded": [describe_condition(x) + (f" ({x['reason']})" if x.get("reason") else "")
                         for x in e.exclude],
            "server_cpus": e.server_cpus, "load_cpus": e.load_cpus, "app": e.app,
            "question": e.question, "metric": e.watched_metric(), "reference": e.reference(),
            "verdict_at": e.verdict_at, "max_repetitions": e.max_reps(), "ci_width": e.ci_width}


def execute(exps: list[Experiment], suite: str, args, repo: Path) -> Path:
    bin_dir = Path(args.bin_dir).resolve()
    results = Path(args.results_dir).resolve()
    missing = [b for b in ("yard-serve", "yard-load") if not (bin_dir / b).exists()
               and any(e.kind == "server" for e in exps)]
    if missing:
        sys.exit(f"yard: {', '.join(missing)} not found in {bin_dir} (build first, or give --bin-dir)")
    models = list_models(bin_dir)
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))
    skipped = skip_unavailable(exps, models, say) + skip_unavailable_runtimes(exps, bin_dir, say)
    hosts = _hosts_ready(args, repo, exps, say)
    ncpus = len(hosts.server.cpus) if hosts else len(os.sched_getaffinity(0))
    dropped = []
    for e in exps:
        if hosts:
            e.load_reserve = 0  # the load runs elsewhere
        for d in e.drop_cpu_points(ncpus):
            dropped.append(d)
            say(f"yard: {e.name}: {d['reason']}")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = results / stamp
    n = 1
    while out.exists():
        n += 1
        out = results / f"{stamp}-{n}"
    (out / "raw").mkdir(parents=True)
    meta = {"suite": suite, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "seed": args.seed, "argv": sys.argv, "environment": environment(repo, bin_dir),
            "models": models, "skipped": skipped, "dropped": dropped,
            "hosts": _hosts_meta(hosts),
            "experiments": [_exp_meta(e, repo) for e in exps]}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    rng = random.Random(args.seed)
    plans = [AdaptivePlan(e, rng) for e in exps]
    prog = Progress(plans, say, live=not args.quiet and sys.stdout.isatty())
    say(f"yard: suite {suite}: {len(exps)} experiment(s), {prog.planned_trials()} trials at "
        f"least ({prog.max_trials()} at most), about {_fmt_secs(prog.left_seconds())} "
        f"(estimate); results in {out}")
    seq = 0
    failed = 0
    try:
        for i, ap in enumerate(plans, 1):
            prog.started(i, ap)
            while not ap.finished():
                for t in ap.next_round():
                    prog.trial(t)
                    for retry in (0, 1):
                        seq += 1
                        rec = run_trial_hosts(t, hosts, seq) if hosts else run_trial(t, bin_dir, seq)
                        rec["retry"] = retry
                        name = "_".join([t.alt.label, *[f"{k}{v}" for k, v in t.point.items()],
                                         f"r{t.rep}", f"try{retry}"])
                        d = out / "raw" / t.exp.name
                        d.mkdir(exist_ok=True)
                        (d / f"{name}.json").write_text(json.dumps(rec, indent=1, default=str))
                        # An invalid generator run is retried once; both are kept and reported.
                        if rec["status"] != "invalid":
                            break
                    ap.record(t, rec)
                    if rec["status"] != "ok":
                        failed += 1
                        prog.warn(f"{t.exp.name} {t.alt.label} {t.point}: {rec['status']}: "
                                  f"{'; '.join(rec['problems'])[:200]}")
                    prog.done(t)
                ap.close()
            prog.finished(i, ap)
    finally:
        prog.stop()
    meta["stops"] = [s for ap in plans for s in ap.summary()]
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    meta["timings"] = prog.timings
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    from .report import write_report  # matplotlib: only for the commands that draw
    report = write_report(out, meta)
    latest = results / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(out.name)
    if failed:
        print(f"yard: {failed} trial(s) failed or invalid (see the report)", file=sys.stderr)
    if not args.quiet:
        from .report import verdict_lines
        print("\nVerdicts (best and worst per experiment; ratio [95% CI]; "
              ">= or <=: a bound the generator set):")
        for line in verdict_lines(out, meta):
            print("  " + line)
    print(report)
    return out


class Progress:
    """What a person sees while a suite runs: in a terminal, a live bar that advances by each
    trial's planned seconds; elsewhere (a log, CI), one line per experiment started and
    finished with its trials done out of the planned total and an estimate of what is left."""

    def __init__(self, plans: list[AdaptivePlan], say, live: bool):
        self.plans, self.say = plans, say
        self.t0 = time.monotonic()
        self.exp_t0 = self.t0
        self.done_planned = 0.0   # planned seconds of the trials run so far
        self.overheads: list[float] = []  # each trial's wall time beyond warm-up and duration
        self.trial_t0 = self.t0
        self.timings: list[dict] = []
        self.bar = None
        if live:
            from rich.progress import (BarColumn, Progress as Bar, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            self.bar = Bar(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                           TextColumn("ETA"), TimeRemainingColumn())
            self.bar.start()
            self.task = self.bar.add_task("trials", total=self.total_seconds())

    def planned_trials(self) -> int:
        return sum(ap.trials_done() + ap.trials_left_min() for ap in self.plans)

    def max_trials(self) -> int:
        return sum(ap.trials_max() for ap in self.plans)

    def total_seconds(self) -> float:
        return self.done_planned + sum(ap.trials_left_min() * ap.exp.trial_seconds()
                                       for ap in self.plans)

    def left_seconds(self) -> float:
        """The trials still planned: each its warm-up and duration plus the median time a trial
        so far has taken beyond those (server start-up, teardown, a load that drains; 1 s
        before the first trial). The median, so that one slow experiment (chat_history's
        trials take 4x their duration) does not inflate every later estimate."""
        extra = statistics.median(self.overheads) if self.overheads else 1.0
        return sum(ap.trials_left_min() * (ap.exp.warmup + ap.exp.duration + max(extra, 0.0))
                   for ap in self.plans)

    def started(self, i: int, ap: AdaptivePlan) -> None:
        self.exp_t0 = time.monotonic()
        if self.bar is None:
            self.say(f"yard: [{i}/{len(self.plans)}] {ap.exp.name} started: "
                     f"{ap.trials_left_min()} trials planned (at most {ap.trials_max()}); "
                     f"{self._done_line()}")

    def _done_line(self) -> str:
        done = sum(ap.trials_done() for ap in self.plans)
        return (f"suite: {done}/{self.planned_trials()} trials done, "
                f"{_fmt_secs(time.monotonic() - self.t0)} elapsed, "
                f"about {_fmt_secs(self.left_seconds())} left")

    def trial(self, t) -> None:
        self.trial_t0 = time.monotonic()
        if self.bar is not None:
            pt = " ".join(f"{k}={v}" for k, v in t.point.items())
            n = sum(ap.trials_done() for ap in self.plans) + 1
            self.bar.update(self.task, description=f"[{n}/{self.planned_trials()}] "
                            f"{t.exp.name} {t.alt.label} {pt}")

    def done(self, t) -> None:
        self.done_planned += t.exp.trial_seconds()
        self.overheads.append(time.monotonic() - self.trial_t0 - t.exp.warmup - t.exp.duration)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done_planned, total=self.total_seconds())

    def warn(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(f"[yellow]{text}")
        else:
            self.say(f"yard: {text}")

    def finished(self, i: int, ap: AdaptivePlan) -> None:
        secs = time.monotonic() - self.exp_t0
        stops = ap.summary()
        at_max = sum(1 for s in stops if s["reason"] == "max")
        self.timings.append({"experiment": ap.exp.name, "seconds": round(secs, 1),
                             "trials": ap.trials_done(), "rounds": ap.rounds,
                             "points": len(stops), "stopped_at_max": at_max})
        if self.bar is None:
            self.say(f"yard: [{i}/{len(self.plans)}] {ap.exp.name} finished: "
                     f"{ap.trials_done()} trials in {_fmt_secs(secs)} ({len(stops)} points, "
                     f"{at_max} stopped at the maximum); {self._done_line()}")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _estimate(exps: list[Experiment]) -> float:
    """Seconds the experiments take here: without the CPU counts this machine would drop."""
    total = 0.0
    for e in exps:
        e = copy.deepcopy(e)
        e.drop_cpu_points(len(os.sched_getaffinity(0)))
        total += e.estimate_seconds()
    return total


def _hosts_ready(args, repo: Path, exps: list[Experiment], say) -> Hosts | None:
    """--hosts: the hosts file read, and every host checked to have this build."""
    path = getattr(args, "hosts", None)
    if not path:
        return None
    try:
        hosts = load_hosts(Path(path))
    except HostsFileError as e:
        sys.exit(f"yard: {e}")
    if any(e.kind != "server" for e in exps):
        sys.exit("yard: --hosts runs server experiments only")
    man = manifest(repo)
    try:
        found = on_each(hosts.all(), lambda h: check_build(h, man))
    except HostError as e:
        sys.exit(f"yard: {e}")
    for h, bad in zip(hosts.all(), found):
        if bad:
            sys.exit(f"yard: {h.where()} does not have this build: {len(bad)} file(s) differ or "
                     f"are missing in {h.dir} (e.g. {', '.join(bad[:3])}); run "
                     f"'yard hosts sync {path}'")
        say(f"yard: {h.where()}: same build, CPUs {h.cpus}")
    return hosts


def _hosts_meta(hosts: Hosts | None) -> dict | None:
    if hosts is None:
        return None
    return {"file": str(hosts.path), "server": asdict(hosts.server),
            "load": [asdict(h) for h in hosts.load]}


def cmd_hosts(args, repo: Path) -> int:
    try:
        hosts = load_hosts(Path(args.file))
    except HostsFileError as e:
        sys.exit(f"yard: {e}")
    man = manifest(repo)
    if not man:
        sys.exit(f"yard: nothing to copy: build first ({repo / 'build' / 'bin'} is empty)")
    def check(h):
        """(line, ok) for one host; every host checked (and synced) at once."""
        try:
            bad = check_build(h, man)
            if bad and args.action == "sync":
                sync(h, repo, bad)
                again = check_build(h, man)
                if again:
                    raise HostError(f"{h.where()}: {len(again)} file(s) still differ after the "
                                    f"copy (e.g. {', '.join(again[:3])})")
                return f"{h.name}: copied {len(bad)} file(s) to {h.dir}", True
            if bad:
                return (f"{h.name}: {len(bad)} of {len(man)} file(s) differ or are missing in "
                        f"{h.dir} (e.g. {', '.join(bad[:3])})", False)
            return f"{h.name}: same build ({len(man)} files)", True
        except HostError as e:
            return f"yard: {e}", None

    status = 0
    for line, ok in on_each(hosts.all(), check):
        print(line, file=sys.stderr if ok is None else sys.stdout)
        status |= 0 if ok else 1
    return status


def cmd_bench(args, repo: Path) -> int:
    exps = _load(repo, Path(args.bin_dir))
    chosen = [e.for_suite(args.suite) for e in exps if e.in_suite(args.suite)]
    if args.only:
        chosen = [e for e in chosen if e.name in args.only]
    if not chosen:
        sys.exit(f"yard: suite {args.suite} has no experiment")
    if args.suite == "full":
        est = _estimate(chosen)
        print(f"yard: the full suite takes about {_fmt_secs(est)}.")
    execute(chosen, args.suite, args, repo)
    return 0


def cmd_run(args, repo: Path) -> int:
    try:
        e = load_experiment(Path(args.file), list_models(Path(args.bin_dir)))
    except (SchemaError, OSError) as err:
        sys.exit(f"yard: {err}")
    if args.suite:
        e = e.for_suite(args.suite)
    execute([e], args.suite or "full", args, repo)
    return 0


def cmd_report(args, repo: Path) -> int:
    from .report import write_report
    print(write_report(Path(args.dir)))
    return 0


def cmd_compare(args, repo: Path) -> int:
    from .compare import compare, text
    res = compare(Path(args.full), Path(args.quick))
    print(text(res))
    return 1 if res["disagreements"] else 0


def cmd_list(args, repo: Path) -> int:
    exps = _load(repo, Path(args.bin_dir))
    for e in exps:
        sizes = ", ".join(f"{s} ~{_fmt_secs(_estimate([e.for_suite(s)]))}"
                          for s in SUITES if e.in_suite(s))
        print(f"{e.name:<20} {e.kind:<6} {e.title}\n{'':<28}alternatives: "
              f"{', '.join(a.label for a in e.alternatives)}; suites: {sizes}")
    return 0


def cmd_loc(args, repo: Path) -> int:
    try:
        t = loc.table(repo)
    except loc.LocError as err:
        sys.exit(f"yard: loc: {err}")
    print(json.dumps(t, indent=2) if args.json else loc.text(t))
    return 0


def _load(repo: Path, bin_dir: Path) -> list[Experiment]:
    try:
        return load_all(repo / "experiments", list_models(bin_dir))
    except SchemaError as err:
        sys.exit(f"yard: {err}")


def main(argv: list[str] | None = None) -> int:
    repo = find_repo()
    p = argparse.ArgumentParser(prog="yard", description="Switchyard benchmark harness: runs "
                                "experiments/*.toml, samples the server's cgroup, writes results/<time>/.")
    p.add_argument("--results-dir", default=str(repo / "results"), help="where results go (default ./results)")
    p.add_argument("--bin-dir", default=str(repo / "build" / "bin"), help="yard-serve and yard-load (default build/bin)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (for CI)")
    p.add_argument("--seed", type=int, default=int(time.time()), help="seed of the trial order")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="run a suite: smoke (seconds), quick (under 8 min of experiments on 2 cores), full (the studies, hours)")
    b.add_argument("suite", nargs="?", default="quick", choices=SUITES)
    b.add_argument("--only", nargs="+", metavar="NAME", help="only these experiments")
    r = sub.add_parser("run", help="run one experiment file")
    r.add_argument("file")
    r.add_argument("--suite", choices=SUITES, help="apply this suite's overrides")
    r.add_argument("--hosts", metavar="FILE", help="run the server and the load on the hosts "
                   "this TOML file names, over SSH (see docs/harness.md)")
    hp = sub.add_parser("hosts", help="check or sync the build on the hosts of a hosts file")
    hp.add_argument("action", choices=("check", "sync"), help="check: compare every host's "
                    "copy with this build by hash; sync: copy what differs over SSH")
    hp.add_argument("file")
    rp = sub.add_parser("report", help="rebuild report.html and the CSVs of a results directory")
    rp.add_argument("dir")
    cp = sub.add_parser("compare", help="check that a quick run ranks every pair of "
                        "alternatives the full run is sure of (CIs apart) the same way; "
                        "exit 1 and list them if not")
    cp.add_argument("full", help="the full suite's results directory")
    cp.add_argument("quick", help="the quick suite's results directory")
    sub.add_parser("list", help="list the experiments and their suites")
    lp = sub.add_parser("loc", help="the lines-of-code table: echo, counter and broadcast chat "
                        "in Eve, the C apps and the peers (docs/harness.md)")
    lp.add_argument("--json", action="store_true", help="print it as JSON")
    rg = sub.add_parser("rig", help="a test rig on this machine: network namespaces that look like "
                        "a server and N load hosts reachable by ssh (root)")
    rig.add_arguments(rg)
    # Let global options appear after the subcommand too.
    for sp in (b, r, rp):
        sp.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        sp.add_argument("--results-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        sp.add_argument("--bin-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    return {"bench": cmd_bench, "run": cmd_run, "report": cmd_report, "list": cmd_list,
            "loc": cmd_loc, "hosts": cmd_hosts, "compare": cmd_compare, "rig": lambda a, _repo: rig.cli(a)}[args.cmd](args, repo)


if __name__ == "__main__":
    sys.exit(main())
