#!/usr/bin/env python3
"""Before/after for an engine change: every yard-serve alternative of the
quick suite's server experiments, run from two builds side by side in one
run (trials interleaved by the harness, server on CPU 0, load on CPU 1),
then a table of medians with their CIs and the ratio after/before.

usage: bench/engine_ab.py BEFORE_BIN_DIR [--after build/bin] [--only eve_echo,rest]
                          [--models coro,reactors] [--repetitions N]
                          [--results results/engine-ab] [--suite quick]
                          [--server-flags '--fsync always'] [--peers go]

BEFORE_BIN_DIR is the bin/ directory of the other build, e.g. from
`git worktree add /tmp/old <rev> && cmake -S /tmp/old -B /tmp/old/build -G Ninja
-DCMAKE_BUILD_TYPE=RelWithDebInfo && ninja -C /tmp/old/build`. yard-load is
always the after build's, so only the server differs. The peers are left
out: they are the same in both builds; --peers keeps the named ones (once)
as a yardstick. --server-flags adds yard-serve flags to every server of
both builds (the same flags in both).
"""

import argparse
import csv
import shlex
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ["eve_echo", "eve_counter", "rest", "papaya_cpu", "chat"]
# The figure of merit per experiment, and whether higher is better.
METRICS = {
    "eve_echo": [("throughput_per_s", True), ("latency_p99_us", False)],
    "eve_counter": [("throughput_per_s", True), ("latency_p99_us", False)],
    "rest": [("throughput_per_s", True), ("latency_p99_us", False)],
    "papaya_cpu": [("cpu_mean_pct", False)],
    "chat": [("latency_p50_us", False), ("latency_p99_us", False), ("cpu_mean_pct", False)],
}


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def toml_dump(data):
    lines = []
    for table, body in data.items():
        arrays = {k: v for k, v in body.items() if isinstance(v, list) and v and
                  all(isinstance(x, dict) for x in v)}
        subtables = {k: v for k, v in body.items() if isinstance(v, dict)}
        lines.append(f"[{table}]")
        for k, v in body.items():
            if k not in arrays and k not in subtables:
                lines.append(f"{k} = {toml_value(v)}")
        for k, v in subtables.items():
            lines.append(f"[{table}.{k}]")
            lines.extend(f"{kk} = {toml_value(vv)}" for kk, vv in v.items())
        for k, items in arrays.items():
            for x in items:
                lines.append(f"[[{table}.{k}]]")
                lines.extend(f"{kk} = {toml_value(vv)}" for kk, vv in x.items())
        lines.append("")
    return "\n".join(lines)


def models():
    out = subprocess.run([ROOT / "build" / "bin" / "yard-serve", "--list-models"], check=True,
                         capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def ab_experiment(name, before, keep=None, repetitions=None, suite="quick", flags=(),
                  peers=()):
    data = tomllib.loads((ROOT / "experiments" / f"{name}.toml").read_text())
    srv = data["servers"]
    extras = []
    if srv.get("models") == "all":
        for m in models():
            argv = ["--app", srv["app"], "--model", m, "--listen", "127.0.0.1:0",
                    *srv.get("flags", []), *flags]
            extras.append({"label": m, "model": m, "argv": ["{bin}/yard-serve", *argv]})
            extras.append({"label": m + "-before", "model": m,
                           "argv": [f"{before}/yard-serve", *argv]})
    for x in srv.get("extra", []):
        argv = x["argv"]
        ours = argv[0] == "{bin}/yard-serve" or argv[0] == "bench/chat_serve"
        if not ours:
            if x["label"] in peers:
                extras.append({**x, "label": x["label"] + "-peer"})  # once: a yardstick
            continue  # a peer: the same in both builds
        x = {**x, "argv": [*argv, *flags]}
        extras.append(x)
        old = [a.replace("{bin}", str(before)) for a in x["argv"]]
        extras.append({**x, "label": x["label"] + "-before", "argv": old})
    data["servers"] = {"app": srv["app"]} if "app" in srv else {}
    data["servers"]["extra"] = extras
    if keep:
        extras = [x for x in extras if x["label"].removesuffix("-before") in keep
                  or x["label"].endswith("-peer")]
        report = data.get("report", {})
        if report.get("baseline") and report["baseline"] not in [x["label"] for x in extras]:
            report["baseline"] = extras[1]["label"]  # the first before
    data["servers"]["extra"] = extras
    if repetitions:
        data.setdefault("suites", {}).setdefault(suite, {})["repetitions"] = repetitions
    data["experiment"]["name"] = name
    return data


def table(results, names):
    rows = list(csv.DictReader(open(results / "summary.csv")))
    by = {(r["experiment"], r["alternative"], r["point"], r["metric"]): r for r in rows}
    out = ["| experiment | point | alternative | metric | before (CI) | after (CI) | after/before "
           "| CIs overlap |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        exp, alt, point, metric = r["experiment"], r["alternative"], r["point"], r["metric"]
        if exp not in names or alt.endswith("-before"):
            continue
        if metric not in dict(METRICS[exp]):
            continue
        b = by.get((exp, alt + "-before", point, metric))
        if not b:
            continue
        ratio = float(r["median"]) / float(b["median"]) if float(b["median"]) else float("nan")
        overlap = (float(r["ci_lo"]) <= float(b["ci_hi"]) and
                   float(b["ci_lo"]) <= float(r["ci_hi"]))
        n = f"n={b.get('n', '?')}/{r.get('n', '?')}"
        out.append(f"| {exp} | {point} | {alt} | {metric} | {float(b['median']):.4g} "
                   f"({float(b['ci_lo']):.4g}..{float(b['ci_hi']):.4g}) | "
                   f"{float(r['median']):.4g} ({float(r['ci_lo']):.4g}..{float(r['ci_hi']):.4g})"
                   f" | {ratio:.3f} | {'yes' if overlap else '**no**'} ({n}) |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("--after", type=Path, default=ROOT / "build" / "bin")
    ap.add_argument("--only", help="comma-separated experiments (default: " +
                    ",".join(EXPERIMENTS) + ")")
    ap.add_argument("--models", help="comma-separated alternatives to keep (default: all)")
    ap.add_argument("--repetitions", type=int, help="trials per point (default: the suite's)")
    ap.add_argument("--results", type=Path, default=ROOT / "results" / "engine-ab")
    ap.add_argument("--suite", default="quick")
    ap.add_argument("--peers", default="",
                    help="comma-separated peers to run once each beside the two builds")
    ap.add_argument("--server-flags", default="",
                    help="yard-serve flags added to every server of both builds")
    args = ap.parse_args()
    before = args.before.resolve()
    if not (before / "yard-serve").exists():
        sys.exit(f"engine_ab: no yard-serve in {before}")
    names = args.only.split(",") if args.only else EXPERIMENTS
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = Path(tmp) / f"{name}.toml"
            keep = set(args.models.split(",")) if args.models else None
            path.write_text(toml_dump(ab_experiment(name, before, keep, args.repetitions,
                                                    args.suite, shlex.split(args.server_flags),
                                                    [p for p in args.peers.split(",") if p])))
            cmd = [ROOT / ".venv" / "bin" / "yard", "--results-dir", args.results, "--bin-dir",
                   args.after, "--quiet", "run", "--suite", args.suite, path]
            print(f"engine_ab: {name}", file=sys.stderr, flush=True)
            subprocess.run(cmd, check=True, cwd=ROOT)
    # Each run wrote its own directory; one table over all of them.
    for d in sorted(p for p in args.results.iterdir() if p.is_dir() and p.name != "latest"):
        print(f"\n{d}\n")
        print(table(d, names))


if __name__ == "__main__":
    main()
