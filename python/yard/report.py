"""Tidy CSV and a self-contained HTML report (plots embedded as base64 PNG)."""

from __future__ import annotations

import base64
import csv
import html
import io
import itertools
import json
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .experiment import point_matches  # noqa: E402
from .loc import html_section as loc_section  # noqa: E402
from .stats import median_ci, ratio_ci  # noqa: E402

# Metric name -> (label, lower is better?)
METRICS: dict[str, tuple[str, bool]] = {
    "throughput_per_s": ("throughput (msg/s)", False),
    "latency_p50_us": ("latency p50 (µs)", True),
    "latency_p99_us": ("latency p99 (µs)", True),
    "cpu_mean_pct": ("server CPU mean (%, 100 = 1 core)", True),
    "cpu_cv": ("server CPU Cv (stdev/mean)", True),
    "cpu_pct_total": ("server CPU over the run (%)", True),
    "cpu_us_per_msg": ("server CPU per message (µs)", True),
    "reads_per_s": ("server read(2) calls/s (/proc/PID/io syscr)", True),
    "ctx_voluntary": ("voluntary context switches", True),
    "ctx_involuntary": ("involuntary context switches", True),
    "mem_max_mib": ("cgroup memory max (MiB)", True),
    "pss_max_mib": ("PSS max (MiB)", True),
    "tasks_max": ("threads/processes max", True),
    # yard-cswitch (tool experiment)
    "direct_ns": ("direct cost of one switch (ns)", True),
    "l1d_misses_per_kinst": ("L1-dcache misses per 1000 instructions", True),
    "l1i_misses_per_kinst": ("L1-icache misses per 1000 instructions", True),
    "dtlb_misses_per_kinst": ("dTLB load misses per 1000 instructions", True),
    "itlb_misses_per_kinst": ("iTLB load misses per 1000 instructions", True),
    # yard-tasks and the Fibonacci peers (tool experiment eve_fib)
    "min_s": ("time, best repetition (s)", True),
    "median_s": ("time, median repetition (s)", True),
    "ns_per_task": ("ns per task (median repetition)", True),
    "tasks": ("tasks per repetition", True),
    "steals": ("tasks stolen (one repetition)", True),
    # bench/chat_history.py (the chat_history experiment's load, its "metrics" object)
    "history_idle_p50_us": ("CHATHISTORY p50, idle (µs)", True),
    "history_idle_p99_us": ("CHATHISTORY p99, idle (µs)", True),
    "history_live_p50_us": ("CHATHISTORY p50, live traffic (µs)", True),
    "history_live_p99_us": ("CHATHISTORY p99, live traffic (µs)", True),
    "history_live_max_us": ("CHATHISTORY max, live traffic (µs)", True),
    "live_delivery_p99_us": ("delivery p99 beside the history requests (µs)", True),
    "persisted_per_s": ("persisted messages/s (--fsync interval)", False),
    "persist_delivery_p99_us": ("delivery p99 while persisting (µs)", True),
}
TABLE_DEFAULT = ["throughput_per_s", "latency_p50_us", "latency_p99_us", "cpu_mean_pct", "cpu_cv",
                 "ctx_voluntary", "ctx_involuntary", "mem_max_mib", "pss_max_mib", "tasks_max"]


def load_trials(out: Path) -> list[dict]:
    trials = []
    for p in sorted((out / "raw").rglob("*.json")):
        trials.append(json.loads(p.read_text()))
    return trials


def _ordered_points(exp: dict, groups) -> list[str]:
    """Point keys in sweep order (as declared), then any others seen in the data."""
    keys = list(exp.get("sweep", {}))
    order = [_pkey(dict(zip(keys, c))) for c in itertools.product(*(exp["sweep"][k] for k in keys))]
    seen = {pk for (e, _, pk) in groups if e == exp["name"]}
    return [pk for pk in order if pk in seen] + sorted(seen - set(order))


def _pkey(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "-"


def write_csv(out: Path, trials: list[dict]) -> list[Path]:
    """trials.csv: one row per trial and metric (tidy); summary.csv: medians and CIs."""
    paths = []
    p = out / "trials.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["experiment", "alternative", "point", "rep", "status", "retry", "metric", "value"])
        for t in trials:
            for k, v in sorted(t.get("metrics", {}).items()):
                w.writerow([t["experiment"], t["alternative"], _pkey(t["point"]), t["rep"],
                            t["status"], t.get("retry", 0), k, v])
    paths.append(p)
    p = out / "summary.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["experiment", "alternative", "point", "metric", "median", "ci_lo", "ci_hi", "n"])
        for (e, a, pk), ms in sorted(_groups(trials).items()):
            for m, vals in sorted(ms.items()):
                est = median_ci(vals)
                w.writerow([e, a, pk, m, est.median, est.lo, est.hi, est.n])
    paths.append(p)
    return paths


def usable(trials: list[dict]) -> list[dict]:
    """The trials that enter the statistics: the valid ones; where a point has no valid trial
    but has generator-invalid ones, those (flagged in the report), rather than a hole."""
    ok = {(t["experiment"], t["alternative"], _pkey(t["point"])) for t in trials if t["status"] == "ok"}
    return [t for t in trials if t["status"] == "ok" or (
        t["status"] == "invalid" and (t["experiment"], t["alternative"], _pkey(t["point"])) not in ok)]


def _flagged(trials: list[dict]) -> set[tuple[str, str, str]]:
    return {(t["experiment"], t["alternative"], _pkey(t["point"])) for t in usable(trials)
            if t["status"] == "invalid"}


def _groups(trials: list[dict]) -> dict[tuple[str, str, str], dict[str, list[float]]]:
    g: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for t in usable(trials):
        for k, v in t.get("metrics", {}).items():
            g[(t["experiment"], t["alternative"], _pkey(t["point"]))][k].append(v)
    return g


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _xvalue(point: dict, xkey: str | None):
    return point.get(xkey) if xkey else None


def _bar(ax, alts: list[str], trials: list[dict], m: str) -> None:
    """A bar per alternative with its CI."""
    have = [a for a in alts if any(t["alternative"] == a and m in t["metrics"] for t in trials)]
    ests = [median_ci([t["metrics"][m] for t in trials if t["alternative"] == a
                       and m in t["metrics"]]) for a in have]
    meds = [e.median for e in ests]
    err = [[e.median - e.lo for e in ests], [e.hi - e.median for e in ests]]
    ax.bar(range(len(have)), meds, yerr=err, capsize=4, color="0.6", edgecolor="black")
    ax.set_xticks(range(len(have)), have, rotation=30)


def _curves(ax, exp: dict, trials: list[dict], m: str, xkey: str) -> None:
    """One line per alternative: the metric's median (with CI) against the sweep key."""
    styles = ["o-", "s-", "^-", "D-", "v-", "P-", "X-", "*-"]
    xs_all = exp["sweep"][xkey]
    for i, a in enumerate(exp["alternatives"]):
        xs, med, lo, hi = [], [], [], []
        for x in xs_all:
            vals = [t["metrics"][m] for t in trials if t["alternative"] == a
                    and t["point"].get(xkey) == x and m in t["metrics"]]
            if not vals:
                continue
            e = median_ci(vals)
            xs.append(x)
            med.append(e.median)
            lo.append(e.median - e.lo)
            hi.append(e.hi - e.median)
        if xs:
            ax.errorbar(xs, med, yerr=[lo, hi], fmt=styles[i % len(styles)], capsize=3,
                        label=a, markersize=4, linewidth=1.2)
    if all(isinstance(x, (int, float)) and x > 0 for x in xs_all) and \
            max(xs_all) / min(xs_all) >= 16:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xkey)
    ax.legend(fontsize=8)


def _positive(exp: dict, trials: list[dict], m: str) -> bool:
    return all(t["metrics"][m] > 0 for t in trials if m in t["metrics"])


def _figure(exp: dict, trials: list[dict], metrics: list[str]) -> str | None:
    """One row per metric. With no sweep, bars per alternative; with a sweep, curves against
    the first sweep key, and one panel per value of the second key when it has several (the
    rest of the point is held as the trials have it)."""
    alts = exp["alternatives"]
    xkeys = list(exp["sweep"])
    xkey = xkeys[0] if xkeys else None
    metrics = [m for m in metrics if any(m in t.get("metrics", {}) for t in trials)]
    if not metrics:
        return None
    facet = next((k for k in xkeys[1:] if len({t["point"].get(k) for t in trials}) > 1), None)
    fvals = [v for v in exp["sweep"][facet] if any(t["point"].get(facet) == v for t in trials)] \
        if facet else [None]
    ncol = min(len(fvals), 4)
    nrow_m = -(-len(fvals) // ncol)  # panel rows per metric
    fig, axes = plt.subplots(len(metrics) * nrow_m, ncol, figsize=(5.2 * ncol, 3.8 * len(metrics) * nrow_m),
                             squeeze=False)
    for ax in axes.flat[len(metrics) * len(fvals):]:
        ax.set_visible(False)
    for mi, m in enumerate(metrics):
        for fi, fv in enumerate(fvals):
            ax = axes[mi * nrow_m + fi // ncol][fi % ncol]
            sub = [t for t in trials if facet is None or t["point"].get(facet) == fv]
            if xkey is None or len(exp["sweep"].get(xkey, [])) <= 1:
                _bar(ax, alts, sub, m)
            else:
                _curves(ax, exp, sub, m, xkey)
            if facet:
                ax.set_title(f"{facet} = {fv}", fontsize=9)
            if exp.get("log_y") and _positive(exp, sub, m):
                ax.set_yscale("log")
            ax.set_ylabel(METRICS.get(m, (m, True))[0])
            ax.grid(True, alpha=0.3)
    fig.suptitle(exp["title"], fontsize=10)
    fig.tight_layout()
    return _png(fig)


def _figure_spec(exp: dict, trials: list[dict], spec: dict) -> str | None:
    """One [[report.figures]] entry: its metric against its x, one line per alternative with
    95% CIs, one panel per combination of the other sweep variables that vary among the
    trials its where selects. With speedup, each line is T(first x)/T(x) for that
    alternative (the ratio of medians, its CI from resampling both), beside the ideal."""
    m, xkey = spec["metric"], spec["x"]
    sub = [t for t in trials if point_matches(t["point"], spec.get("where") or {})
           and m in t.get("metrics", {})]
    if not sub:
        return None
    keys = [k for k in exp["sweep"] if k != xkey
            and len({json.dumps(t["point"].get(k)) for t in sub}) > 1]
    combos = [c for c in itertools.product(*(exp["sweep"][k] for k in keys))
              if any(all(t["point"].get(k) == v for k, v in zip(keys, c)) for t in sub)]
    ncol = min(len(combos), 4)
    nrow = -(-len(combos) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 3.8 * nrow), squeeze=False)
    for ax in axes.flat[len(combos):]:
        ax.set_visible(False)
    styles = ["o-", "s-", "^-", "D-", "v-", "P-", "X-", "*-"]
    speedup = spec.get("speedup", False)
    for ci, combo in enumerate(combos):
        ax = axes[ci // ncol][ci % ncol]
        panel = [t for t in sub if all(t["point"].get(k) == v for k, v in zip(keys, combo))]
        xs_panel = []
        for i, a in enumerate(exp["alternatives"]):
            by_x = {x: [t["metrics"][m] for t in panel if t["alternative"] == a
                        and t["point"].get(xkey) == x] for x in exp["sweep"][xkey]}
            by_x = {x: v for x, v in by_x.items() if v}
            if not by_x:
                continue
            x0 = next(iter(by_x))
            xs, med, lo, hi = [], [], [], []
            for x, vals in by_x.items():
                e = ratio_ci(by_x[x0], vals) if speedup else median_ci(vals)
                if e.n == 0:
                    continue
                xs.append(x)
                med.append(e.median)
                lo.append(max(0.0, e.median - e.lo))
                hi.append(max(0.0, e.hi - e.median))
            xs_panel += xs
            # The alternative's own colour and marker in every panel, whoever is missing.
            ax.errorbar(xs, med, yerr=[lo, hi], fmt=styles[i % len(styles)], capsize=3,
                        color=f"C{i % 10}", label=a, markersize=4, linewidth=1.2)
        if speedup and xs_panel:
            x0 = min(xs_panel)
            ideal = sorted(set(xs_panel))
            ax.plot(ideal, [x / x0 for x in ideal], "k:", linewidth=1, label="ideal")
        if keys:
            ax.set_title(_pkey(dict(zip(keys, combo))), fontsize=9)
        ax.set_xlabel(xkey)
        xs_all = sorted(set(xs_panel))
        if xs_all and all(isinstance(x, (int, float)) and x > 0 for x in xs_all):
            if xs_all[-1] / xs_all[0] >= 16:
                ax.set_xscale("log", base=2)
            elif len(xs_all) <= 12:
                ax.set_xticks(xs_all)
        label = METRICS.get(m, (m, True))[0]
        ax.set_ylabel(f"speedup over {xkey} = {min(xs_all)} (x)" if speedup and xs_all
                      else label)
        if spec.get("log_y") and not speedup and _positive(exp, panel, m):
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    where = spec.get("where") or {}
    title = spec.get("title") or f"{exp['title']}: {METRICS.get(m, (m,))[0]}"
    fig.suptitle(title + (f" ({_pkey(where)})" if where and not spec.get("title") else ""),
                 fontsize=10)
    fig.tight_layout()
    return _png(fig)


def _bars_figure(exp: dict, trials: list[dict], metrics: list[str]) -> str | None:
    """report.bars_at: one bar per alternative at one sweep point (e.g. cswitch's direct cost
    with no work between switches)."""
    at = exp.get("bars_at") or {}
    sub = [t for t in trials if all(t["point"].get(k) == v for k, v in at.items())]
    metrics = [m for m in metrics if any(m in t.get("metrics", {}) for t in sub)]
    if not at or not metrics:
        return None
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 3.8), squeeze=False)
    for ax, m in zip(axes[0], metrics):
        _bar(ax, exp["alternatives"], sub, m)
        if exp.get("log_y") and _positive(exp, sub, m):
            ax.set_yscale("log")
        ax.set_ylabel(METRICS.get(m, (m, True))[0])
        ax.grid(True, alpha=0.3, axis="y")
    fig.suptitle(f"{exp['title']}: {_pkey(at)}", fontsize=10)
    return _png(fig)


def _summary(exp: dict, groups, metrics: list[str]) -> list[str]:
    """Who wins where, and by how much (ratio of medians with its CI, winner vs runner-up)."""
    lines = []
    pts = _ordered_points(exp, groups)
    for m in metrics:
        label, lower_better = METRICS.get(m, (m, True))
        wins: dict[str, int] = defaultdict(int)
        detail = None
        for pk in pts:
            cands = [(a, groups[(exp["name"], a, pk)][m]) for a in exp["alternatives"]
                     if m in groups.get((exp["name"], a, pk), {})]
            if len(cands) < 2:
                continue
            ranked = sorted(cands, key=lambda c: median_ci(c[1]).median, reverse=not lower_better)
            (wa, wv), (ra, rv) = ranked[0], ranked[1]
            if median_ci(wv).median == median_ci(rv).median:
                continue  # a tie names no winner
            wins[wa] += 1
            r = ratio_ci(rv, wv) if lower_better else ratio_ci(wv, rv)
            detail = (pk, wa, ra, r)
        if not wins:
            continue
        total = sum(wins.values())
        order = ", ".join(f"{a} at {n}/{total}" for a, n in sorted(wins.items(), key=lambda x: -x[1]))
        s = f"<b>{html.escape(label)}</b> ({'lower' if lower_better else 'higher'} is better): best is {html.escape(order)} point(s)"
        if detail:
            pk, wa, ra, r = detail
            s += (f"; at {html.escape(pk)}, {html.escape(wa)} beats {html.escape(ra)} by "
                  f"{r.median:.2f}x [95% CI {r.lo:.2f}, {r.hi:.2f}]")
            if r.n < 3:
                s += " (too few trials for a firm CI)"
            elif r.lo <= 1.0:
                s += " (not significant: the CI includes 1)"
        lines.append(s + ".")
    return lines


def _hosts_table(trials: list[dict]) -> str:
    """Distributed trials: one row per load host per trial, beside the merged figures."""
    rows = []
    for t in sorted((t for t in trials if t.get("hosts")),
                    key=lambda t: (t["alternative"], _pkey(t["point"]), t["rep"])):
        for name, h in sorted(t["hosts"].items()):
            lat = h.get("latency_us") or {}

            def f(v, fmt="{:.0f}"):
                return fmt.format(v) if isinstance(v, (int, float)) else ""
            rows.append(
                f"<tr><td>{html.escape(t['alternative'])}</td><td>{html.escape(_pkey(t['point']))}"
                f"</td><td>{t['rep']}</td><td>{html.escape(name)}</td>"
                f"<td>{f(h.get('window_messages'))}</td><td>{f(h.get('window_throughput_per_s'))}"
                f"</td><td>{f(lat.get('p50'), '{:.1f}')}</td><td>{f(lat.get('p99'), '{:.1f}')}</td>"
                f"<td>{f(h.get('generator_cpu_pct'), '{:.0f}%')}</td>"
                f"<td>{f(h.get('offset_s') * 1e3 if h.get('offset_s') is not None else None, '{:+.2f}')}"
                f"</td><td>{f(h.get('start_skew_s') * 1e3 if h.get('start_skew_s') is not None else None, '{:+.2f}')}"
                f"</td></tr>")
    if not rows:
        return ""
    return ("<h4>Load hosts</h4><p>Each load host's own share of the merged figures above (its "
            "window's requests, rate and latency from its interval histograms), its "
            "generator's CPU, its clock's measured offset from the harness's, and how far from "
            "the agreed instant it started (ms).</p><table><tr><th>alternative</th><th>point</th>"
            "<th>rep</th><th>host</th><th>requests</th><th>requests/s</th><th>p50 µs</th>"
            "<th>p99 µs</th><th>generator CPU</th><th>clock offset ms</th><th>start skew ms</th>"
            "</tr>" + "".join(rows) + "</table>")


def _ratio_tables(exp: dict, groups, metrics: list[str]) -> str:
    """One ratio table per baseline: report.baseline, or each of its list."""
    bases = exp.get("baselines") or [exp.get("baseline")]
    return "".join(_ratio_table(exp, groups, metrics, b) for b in bases)


def _pairs_table(exp: dict, groups, metrics: list[str]) -> str:
    """report.pairs: named ratios (alternative / baseline) side by side, one column per pair
    and metric, one row per sweep point."""
    pairs = exp.get("pairs") or []
    if not pairs:
        return ""
    pts = _ordered_points(exp, groups)
    head = "".join(
        f"<th>{html.escape(p['label'])}<br><small>{html.escape(p['alternative'])} / "
        f"{html.escape(p['baseline'])}, {html.escape(METRICS.get(m, (m,))[0])}</small></th>"
        for p in pairs for m in metrics)
    rows = []
    for pk in pts:
        cells = []
        for p in pairs:
            a = groups.get((exp["name"], p["alternative"], pk), {})
            b = groups.get((exp["name"], p["baseline"], pk), {})
            for m in metrics:
                cells.append(ratio_ci(a[m], b[m]).fmt() if m in a and m in b else "")
        if any(cells):
            rows.append(f"<tr><td>{html.escape(pk)}</td>"
                        + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not rows:
        return ""
    return ("<h4>Pairings side by side (median ratio [95% bootstrap CI]; below 1: the first "
            f"uses less)</h4><table><tr><th>point</th>{head}</tr>{''.join(rows)}</table>")


def _note(exp: dict) -> str:
    """report.note: paragraphs separated by blank lines."""
    text = (exp.get("note") or "").strip()
    if not text:
        return ""
    paras = [p.strip() for p in text.split("\n\n") if p.strip()]
    return "".join(f"<p>{html.escape(' '.join(p.split()))}</p>" for p in paras)


def _ratio_table(exp: dict, groups, metrics: list[str], base: str | None = None) -> str:
    base = base or exp.get("baseline") or (exp["alternatives"][0] if exp["alternatives"] else None)
    if not base or len(exp["alternatives"]) < 2:
        return ""
    pts = _ordered_points(exp, groups)
    rows = []
    for pk in pts:
        b = groups.get((exp["name"], base, pk), {})
        for a in exp["alternatives"]:
            if a == base:
                continue
            g = groups.get((exp["name"], a, pk), {})
            cells = []
            for m in metrics:
                if m in g and m in b:
                    cells.append(ratio_ci(g[m], b[m]).fmt())
                else:
                    cells.append("")
            rows.append(f"<tr><td>{html.escape(a)}</td><td>{html.escape(pk)}</td>"
                        + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(METRICS.get(m, (m,))[0])}</th>" for m in metrics)
    return (f"<h4>Ratios to {html.escape(base)} (median ratio [95% bootstrap CI])</h4>"
            f"<table><tr><th>alternative</th><th>point</th>{head}</tr>{''.join(rows)}</table>")


# The reference peers' rows in the feature table, in the models' trait vocabulary
# (include/yard/model.h) plus two that only runtimes differ in: whether the scheduler
# preempts a busy task, and what restarts a failed part. Shown for the peers a run used.
PEER_FEATURES = {
    "go": {"summary": "Go: a goroutine per connection (net, net/http), M:N on GOMAXPROCS threads",
           "traits": {"multi_threaded": True, "multi_process": False, "lightweight_threads": True,
                      "event_based": False, "completion_based": False,
                      "explicit_concurrency": True,
                      "shared_state": "shared memory: atomics, sync.Map",
                      "ipc": "shared memory, channels",
                      "error_isolation": "none: a panic ends the process",
                      "preemptive_scheduler": "yes (async preemption since Go 1.14)",
                      "supervision": "none"}},
    "node": {"summary": "Node.js: one event loop (--cluster N: N processes), Express for REST",
             "traits": {"multi_threaded": False, "multi_process": "with --cluster",
                        "lightweight_threads": False, "event_based": True,
                        "completion_based": False, "explicit_concurrency": False,
                        "shared_state": "one heap per process; cluster: IPC to the primary",
                        "ipc": "cluster: messages over pipes",
                        "error_isolation": "none: an uncaught exception ends the process",
                        "preemptive_scheduler": "no (run to completion)",
                        "supervision": "cluster primary (no restart here)"}},
    "erlang": {"summary": "Erlang/OTP: a process per connection, inets httpd for REST",
               "traits": {"multi_threaded": True, "multi_process": False,
                          "lightweight_threads": True, "event_based": False,
                          "completion_based": False, "explicit_concurrency": True,
                          "shared_state": "share-nothing; ETS tables, one counter process",
                          "ipc": "message passing",
                          "error_isolation": "per connection: a crash ends one process",
                          "preemptive_scheduler": "yes (reductions); bcrypt on dirty schedulers",
                          "supervision": "inets' supervisors"}},
    "elixir": {"summary": "Elixir: a Task per connection under a Task.Supervisor, its own "
                          "HTTP/1.1 over gen_tcp for REST",
               "traits": {"multi_threaded": True, "multi_process": False,
                          "lightweight_threads": True, "event_based": False,
                          "completion_based": False, "explicit_concurrency": True,
                          "shared_state": "share-nothing; ETS tables, :atomics counter",
                          "ipc": "message passing",
                          "error_isolation": "per connection: a crash ends one process",
                          "preemptive_scheduler": "yes (reductions); bcrypt on dirty schedulers",
                          "supervision": "a supervisor over the acceptors and the "
                                         "connections' Task.Supervisor"}},
    "rust-tokio": {"summary": "Rust on tokio: a task per connection, M:N work stealing over "
                              "epoll (the paradigm of coro); hyper for REST",
                   "traits": {"multi_threaded": True, "multi_process": False,
                              "lightweight_threads": True, "event_based": False,
                              "completion_based": False, "explicit_concurrency": True,
                              "shared_state": "shared memory: an atomic, RwLock'd maps",
                              "ipc": "shared memory, channels (broadcast)",
                              "error_isolation": "none: built with panic = abort",
                              "preemptive_scheduler": "no (cooperative; a budget per task "
                                                      "forces yields at I/O); bcrypt on "
                                                      "spawn_blocking's threads",
                              "supervision": "none"}},
    "rust-monoio": {"summary": "Rust on monoio: thread-per-core io_uring runtimes, each with "
                               "its own SO_REUSEPORT listener (the paradigm of uring)",
                    "traits": {"multi_threaded": True, "multi_process": False,
                               "lightweight_threads": True, "event_based": True,
                               "completion_based": True, "explicit_concurrency": True,
                               "shared_state": "shared memory: an atomic",
                               "ipc": "none (a connection stays on its thread)",
                               "error_isolation": "none: built with panic = abort",
                               "preemptive_scheduler": "no (cooperative, no stealing)",
                               "supervision": "none"}},
}


def peer_rows(experiments: list[dict]) -> list[dict]:
    """The PEER_FEATURES rows of the peers the run's experiments compared
    (an alternative 'node-cluster' counts as node, 'go-papaya' as go; 'rust-tokio'
    and 'rust-monoio' are rows of their own)."""
    alts = {a for e in experiments for a in e.get("alternatives", [])}
    used = alts | {a.split("-")[0] for a in alts}
    return [{"name": n, **f} for n, f in PEER_FEATURES.items() if n in used]


def _feature_table(models: list[dict]) -> str:
    if not models:
        return "<p>No model list available (<code>yard-serve --list-models --json</code> failed).</p>"
    keys: list[str] = []
    for m in models:
        for k in (m.get("traits") or {}):
            if k not in keys:
                keys.append(k)

    def cell(v: Any) -> str:
        if v is True:
            return "yes"
        if v is False:
            return "no"
        return html.escape(str(v)) if v is not None else ""

    head = "".join(f"<th>{html.escape(k.replace('_', ' '))}</th>" for k in keys)
    rows = "".join(
        f"<tr><td><b>{html.escape(m.get('name', '?'))}</b></td><td>{html.escape(m.get('summary', ''))}</td>"
        + "".join(f"<td>{cell((m.get('traits') or {}).get(k))}</td>" for k in keys) + "</tr>"
        for m in models)
    return f"<table class='features'><tr><th>model</th><th>summary</th>{head}</tr>{rows}</table>"


CSS = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#111}
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}
td,th{border:1px solid #999;padding:2px 6px;text-align:right;vertical-align:top}
th{background:#eee}td:first-child,th:first-child{text-align:left}
table.features td{text-align:left}
pre{background:#f4f4f4;padding:.5em;overflow-x:auto;font-size:.8em;white-space:pre-wrap}
img{max-width:100%}.warn{color:#a00}
table.verdicts td,table.verdicts th{text-align:left}table.heatmap td.heat{text-align:center;min-width:4.5em}
td.heat-empty{text-align:center;color:#999}table.heatmap{font-size:.75em}p.small{font-size:.8em}details{margin:.4em 0}summary{cursor:pointer}
@media print{section{page-break-inside:avoid}}
"""


def _skip_text(s: dict) -> str:
    what = f"runtime {s['runtime']}" if s.get("runtime") else f"--model {s.get('model')}"
    return f"{s['experiment']} {s['alternative']} ({what}: {s['reason']})"


def write_report(out: Path, meta: dict | None = None) -> Path:
    meta = meta or json.loads((out / "meta.json").read_text())
    trials = load_trials(out)
    write_csv(out, trials)
    groups = _groups(trials)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Switchyard report "
             f"{html.escape(meta.get('started', ''))}</title><style>{CSS}</style></head><body>",
             "<h1>Switchyard: which concurrency model costs what, on this machine</h1>"]
    env = meta.get("environment", {})
    parts.append("<p>Suite <b>%s</b>, started %s. %s</p>" % (
        html.escape(str(meta.get("suite"))), html.escape(str(meta.get("started"))),
        html.escape(", ".join(f"{k}: {v}" for k, v in env.items() if v is not None))))
    # Verdicts first: what the run found, before the feature table and the experiments.
    parts.append(verdict_section(meta, trials))
    parts.append("<p>Every number is a median over independent trials with its 95% bootstrap "
                 "confidence interval in brackets. Trials run interleaved in random order, each "
                 "with a fresh server in its own cgroup, server and load generator pinned to "
                 "different CPUs. CPU% is top-compatible (100% = one core); Cv = stdev/mean of "
                 "the CPU% series, first sample dropped.</p>")
    cg = {json.dumps(t.get("cgroup"), sort_keys=True) for t in trials if t.get("cgroup")}
    if any('"exact_cpu": false' in c for c in cg):
        parts.append("<p class='warn'>No cgroup could be created: CPU was measured by a /proc "
                     "walk and is approximate.</p>")
    unmeasured = [t for t in trials if t.get("cpu_unmeasured")]
    if unmeasured:
        parts.append(f"<p class='warn'>{len(unmeasured)} trial(s) have no server CPU figure: "
                     f"{html.escape(unmeasured[0]['cpu_unmeasured'])}.</p>")
    hosts = meta.get("hosts")
    if hosts:
        srv = hosts["server"]
        parts.append(
            f"<p><b>Distributed run</b> ({html.escape(hosts['file'])}): the server on "
            f"{html.escape(srv['name'])} ({html.escape(srv['ssh'])}, CPUs {srv['cpus']}), "
            "measured there; the load on " + ", ".join(
                f"{html.escape(h['name'])} ({html.escape(h['ssh'])}, CPUs {h['cpus']})"
                for h in hosts["load"]) + ", each running the experiment's load as written, "
            "started together, latencies merged from their interval histograms.</p>")
    parts.append("<h2>The models</h2>" + _feature_table(
        meta.get("models", []) + (peer_rows(meta.get("experiments", []))
                                  if meta.get("models") else [])))
    skipped = meta.get("skipped") or []
    if skipped:
        parts.append("<p class='warn'>Skipped on this machine: " + "; ".join(
            html.escape(_skip_text(s)) for s in skipped) + ".</p>")
    for exp in meta.get("experiments", []):
        et = [t for t in trials if t["experiment"] == exp["name"]]
        parts.append(f"<section id='exp-{html.escape(exp['name'])}'><h2>{html.escape(exp['title'])}</h2>")
        if exp.get("description"):
            parts.append(f"<p>{html.escape(exp['description'])}</p>")
        if exp.get("excluded"):
            parts.append("<p>Not run, by design: " + "; ".join(
                html.escape(x) for x in exp["excluded"]) + ".</p>")
        mine = [s for s in skipped if s["experiment"] == exp["name"]]
        if mine:
            parts.append("<p class='warn'>Not available on this machine, so not run: " + "; ".join(
                html.escape(_skip_text(s)) for s in mine) + ".</p>")
        gone = [d for d in meta.get("dropped") or [] if d["experiment"] == exp["name"]]
        if gone:
            parts.append("<p class='warn'>Points not run on this machine: " + "; ".join(
                html.escape(d["reason"]) for d in gone) + ".</p>")
        ok = usable(et)
        bad = [t for t in et if t["status"] != "ok"]
        flagged = _flagged(et)
        metrics = exp.get("plots") or []
        present = [m for m in METRICS if any(m in t.get("metrics", {}) for t in ok)]
        # A load's own figures (its JSON's "metrics") can be named in plots and table too.
        present += sorted({k for t in ok for k in t.get("metrics", {})} - set(present))
        if exp["kind"] == "tool":
            present = sorted({k for t in ok for k in t.get("metrics", {})} - set(exp.get("sweep", {})))
        table_metrics = [m for m in (exp.get("table") or (TABLE_DEFAULT if exp["kind"] == "server"
                                                           else present)) if m in present]
        plot_metrics = [m for m in metrics if m in present] or table_metrics[:2]
        absent = [m for m in metrics if m not in present]
        if ok and absent:
            parts.append("<p>Not measured on this machine (the tool did not report them; for "
                         "hardware counters, the CPU or VM does not expose them): " + ", ".join(
                             html.escape(METRICS.get(m, (m,))[0]) for m in absent) + ".</p>")
        if flagged:
            parts.append("<p class='warn'>Some points had only invalid trials (the generator fell "
                         "behind its schedule, or used its whole core while the server had room, "
                         "so it set the figure); they are shown, flagged, rather than left out.</p>")
        valid = [t for t in et if t["status"] == "ok"]
        both = [t for t in valid if t.get("saturated")]
        if both:
            parts.append(f"<p>{len(both)} of {len(valid)} valid trials had both the server and the "
                         f"generator at the limit of their cores (server at least "
                         f"{html.escape(str(min(t['saturated']['server_cpu_pct'] for t in both)))}%"
                         "). They count: the server had no room left, so its figure is its "
                         "capacity here; over loopback both sides pay the kernel's TCP path "
                         "alike, so a fast server and the generator saturate together.</p>")
        if not ok:
            parts.append("<p class='warn'>No valid trial.</p>")
        else:
            parts.append("<h3>Summary</h3><ul>" + "".join(
                f"<li>{s}</li>" for s in _summary(exp, groups, plot_metrics)) + "</ul>")
            png = _bars_figure(exp, ok, plot_metrics)
            if png:
                parts.append(f"<img alt='{html.escape(exp['title'])} at one point' "
                             f"src='data:image/png;base64,{png}'>")
            specs = exp.get("figures") or []
            for spec in specs:
                png = _figure_spec(exp, ok, spec)
                if png:
                    alt = spec.get("title") or f"{exp['title']}: {spec['metric']}"
                    parts.append(f"<img alt='{html.escape(alt)}' src='data:image/png;base64,{png}'>")
            png = None if specs else _figure(exp, ok, plot_metrics)
            if png:
                parts.append(f"<img alt='{html.escape(exp['title'])}' src='data:image/png;base64,{png}'>")
            head = "".join(f"<th>{html.escape(METRICS.get(m, (m,))[0])}</th>" for m in table_metrics)
            rows = []
            pts = _ordered_points(exp, groups)
            for a in exp["alternatives"]:
                for pk in pts:
                    g = groups.get((exp["name"], a, pk))
                    if not g:
                        continue
                    cells = "".join(f"<td>{median_ci(g[m]).fmt() if m in g else ''}</td>"
                                    for m in table_metrics)
                    note = (" <span class='warn'>(generator-invalid trials only)</span>"
                            if (exp["name"], a, pk) in flagged else "")
                    rows.append(f"<tr><td>{html.escape(a)}</td><td>{html.escape(pk)}{note}</td>{cells}</tr>")
            # The long tables fold under the plots (<details>): the figures and the summary
            # are what a reader takes in first.
            parts.append(f"<details><summary>Table: medians [95% CI] per alternative and point "
                         f"({len(rows)} rows)</summary><table><tr><th>alternative</th><th>point"
                         f"</th>{head}</tr>" + "".join(rows) + "</table></details>")
            extra = (_pairs_table(exp, groups, plot_metrics) + _ratio_tables(exp, groups, plot_metrics)
                     + _hosts_table(et))
            if extra:
                parts.append(f"<details><summary>Ratios and pairings</summary>{extra}</details>")
            parts.append(_stops_table(exp, meta.get("stops") or []))
            parts.append(_note(exp))
        if bad:
            parts.append(f"<details><summary>Failed, invalid or retried trials ({len(bad)})</summary><ul>" + "".join(
                f"<li>{html.escape(t['alternative'])} {html.escape(_pkey(t['point']))} rep {t['rep']}"
                f" retry {t.get('retry', 0)}: {html.escape(t['status'])}: "
                f"{html.escape('; '.join(t.get('problems', [])))}</li>" for t in bad) + "</ul></details>")
        cmds = []
        seen = set()
        for t in et:
            if t["alternative"] in seen or "commands" not in t:
                continue
            seen.add(t["alternative"])
            for role, argv in t["commands"].items():
                cmds.append(f"# {t['alternative']} {role} ({_pkey(t['point'])})\n"
                            + " ".join(shlex.quote(a) for a in argv))
        parts.append(f"<details><summary>Commands</summary><p>Run with <code>yard run {html.escape(exp['path'])}</code>; "
                     f"{exp['repetitions']} repetition(s), duration {exp['duration']} s, warm-up "
                     f"{exp['warmup']} s, sample every {exp['sample_interval']} s. One trial's exact commands "
                     f"(the port changes per trial):</p><pre>{html.escape(chr(10).join(cmds))}</pre></details></section>")
    parts.append(loc_section())
    parts.append("<p>Raw data: <code>raw/</code> (one JSON per trial), <code>trials.csv</code>, "
                 "<code>summary.csv</code>.</p></body></html>")
    p = out / "report.html"
    p.write_text("\n".join(parts))
    return p


# ---- Verdicts first (issue 41): one row per experiment and a models x workloads heat-map ----

def _lower_better(metric: str) -> bool:
    return METRICS.get(metric, (metric, True))[1]


def _exp_metric(exp: dict) -> str:
    return exp.get("metric") or (exp.get("plots") or [None])[0] or (
        "throughput_per_s" if exp.get("kind") == "server" else "median_s")


def _verdict_point(exp: dict, groups, metric: str) -> str | None:
    """The point the verdict ranks at: report.verdict_at (else report.bars_at) when given,
    else the point where the most alternatives measured the metric, the last such in sweep
    order (the heaviest load the sweep declares last)."""
    pts = _ordered_points(exp, groups)
    at = exp.get("verdict_at") or exp.get("bars_at") or {}
    if at:
        want = [pk for pk in pts if all(f"{k}={v}" in pk.split(", ") for k, v in at.items())]
        pts = want or pts
    best, most = None, 1
    for pk in pts:
        n = sum(1 for a in exp["alternatives"] if metric in groups.get((exp["name"], a, pk), {}))
        if n >= most:
            best, most = pk, n
    return best


# The task runtimes an engineer would pick instead of ours (yard-tasks' peers, issue 13).
TASK_PEERS = ("openmp", "tbb", "forkjoin")
ENGINE_MODELS = ("fork", "thread", "epoll", "reactors", "coro", "uring")


def alternative_side(alt: str, models: list[str]) -> str | None:
    """'ours' for the engine's models and their variants (fork-pair, coro-perms, epoll+tls,
    epoll+fib35) and the Eve programs; 'peer' for what an engineer would pick instead (the
    peers of docs/peers.md and their variants: node-cluster, go+tls, rust-tokio; OpenMP, TBB,
    Java's ForkJoin); None for the rest (the context switch's kernel mechanisms, the plain
    threads baseline)."""
    head = alt.split("+", 1)[0]
    if any(head == p or head.startswith(p + "-") for p in (*PEER_FEATURES, *TASK_PEERS)):
        return "peer"
    if any(head == m or head.startswith(m + "-") for m in (*models, "eve")):
        return "ours"
    return None


def _bound_mark(a_bounded: bool, b_bounded: bool) -> str:
    """The mark of a ratio that says how far A is ahead of B (above 1: A is better) when the
    generator set a figure: a generator-bound figure is one the server could better (a rate
    it could raise, a cost or latency it could lower), so A's makes the ratio a lower bound
    ('>='), B's an upper bound ('<='), both no ranking ('?')."""
    if a_bounded and b_bounded:
        return "?"
    return ">=" if a_bounded else "<=" if b_bounded else ""


def verdicts(meta: dict, trials: list[dict]) -> list[dict]:
    """Per experiment: at its verdict point, every alternative's median of the watched metric,
    the best and the worst, the ratio between them with its CI, the marks that make the
    ratio a lower bound or weak, and our best model against the best peer (issue 43)."""
    groups = _groups(trials)
    flagged = _flagged(trials)
    saturated = {(t["experiment"], t["alternative"], _pkey(t["point"])) for t in trials
                 if t.get("saturated") and t["status"] == "ok"}
    out = []
    for exp in meta.get("experiments", []):
        name = exp["name"]
        metric = _exp_metric(exp)
        lower = _lower_better(metric)
        row: dict[str, Any] = {"experiment": name, "title": exp.get("title", name),
                               "question": exp.get("question") or exp.get("title", name),
                               "metric": metric, "metric_label": METRICS.get(metric, (metric,))[0],
                               "lower_better": lower, "marks": [], "cells": {}}
        pk = _verdict_point(exp, groups, metric)
        row["point"] = pk
        vals = {a: groups[(name, a, pk)][metric] for a in exp["alternatives"]
                if pk is not None and metric in groups.get((name, a, pk), {})}
        if len(vals) < 2:
            row["marks"].append("fewer than two alternatives measured: no ranking")
            out.append(row)
            continue
        meds = {a: median_ci(v) for a, v in vals.items()}
        order = sorted(vals, key=lambda a: meds[a].median, reverse=not lower)
        best, worst = order[0], order[-1]
        row["best"], row["worst"] = best, worst
        row["best_value"], row["worst_value"] = meds[best], meds[worst]
        r = ratio_ci(vals[worst], vals[best]) if lower else ratio_ci(vals[best], vals[worst])
        row["ratio"] = r
        for a, v in vals.items():
            rel = ratio_ci(v, vals[best])
            row["cells"][a] = {"median": meds[a], "rel": rel, "n": len(v),
                               "flagged": (name, a, pk) in flagged}
        # A generator-bound figure is a lower bound of the server's rate (an upper bound of
        # its cost): the best one's makes the gap a lower bound, the worst one's an upper one.
        def bounded(a):
            return (name, a, pk) in flagged or (name, a, pk) in saturated

        row["bound"] = _bound_mark(bounded(best), bounded(worst))
        gen = [a for a in (best, worst) if bounded(a)]
        if gen:
            row["marks"].append("generator-bound (" + ", ".join(gen) + "): its figure is a "
                                "bound of what the server can do")
        # Our best model against the best peer: above 1 when ours is ahead (a rate ours /
        # the peer's, a cost the peer's / ours).
        models = [m["name"] for m in meta.get("models") or [] if m.get("name")] or ENGINE_MODELS
        ours = [a for a in order if alternative_side(a, models) == "ours"]
        peers = [a for a in order if alternative_side(a, models) == "peer"]
        if ours and peers:
            o, pe = ours[0], peers[0]
            row["ours"], row["peer"] = o, pe
            row["ours_vs_peer"] = (ratio_ci(vals[pe], vals[o]) if lower
                                   else ratio_ci(vals[o], vals[pe]))
            row["ours_vs_peer_bound"] = _bound_mark(bounded(o), bounded(pe))
        row["partial"] = False
        sk = [s["alternative"] for s in meta.get("skipped") or [] if s["experiment"] == name]
        if sk:
            row["partial"] = True
            row["marks"].append("skipped here: " + ", ".join(sk))
        dropped = [d for d in meta.get("dropped") or [] if d["experiment"] == name]
        if dropped:
            row["partial"] = True
            row["marks"].append("machine too small: " + "; ".join(d["reason"] for d in dropped))
        if min(len(vals[best]), len(vals[worst])) < 2:
            row["marks"].append("one trial: no CI")
        elif r.lo <= 1.0:
            row["marks"].append("not significant: the CI includes 1")
        stops = [s for s in meta.get("stops") or [] if s["experiment"] == name]
        if stops:
            row["trials"] = sum(s["n"] for s in stops)
            row["at_max"] = sum(1 for s in stops if s["reason"] == "max")
        out.append(row)
    return out


def _ratio_text(r) -> str:
    if r.n == 0:
        return "n/a"
    if r.n == 1 or r.lo == r.hi:
        return f"{r.median:.2f}x (n=1)"
    return f"{r.median:.2f}x [{r.lo:.2f}, {r.hi:.2f}]"


def _ours_vs_peer_text(v: dict) -> str:
    ge = {">=": ">= ", "<=": "<= ", "?": "bound? "}.get(v.get("ours_vs_peer_bound", ""), "")
    return (f"our best {v['ours']} against the best peer {v['peer']}: "
            f"{ge}{_ratio_text(v['ours_vs_peer'])}")


def verdict_text(v: dict) -> str:
    """One verdict row as a line of text (make bench prints them)."""
    head = f"{v['experiment']}: {v['question']}"
    if "best" not in v:
        return f"{head}: {'; '.join(v['marks'])}"
    ge = {">=": ">= ", "<=": "<= ", "?": "bound? "}.get(v.get("bound", ""), "")
    how = "cost" if v["lower_better"] else "rate"
    s = (f"{head}: best {v['best']}, worst {v['worst']}, {ge}{_ratio_text(v['ratio'])} "
         f"({how}: {v['metric_label']} at {v['point']})")
    if "ours" in v:
        s += f"; {_ours_vs_peer_text(v)}"
    if v["marks"]:
        s += "; " + "; ".join(v["marks"])
    return s


def verdict_lines(out: Path, meta: dict | None = None) -> list[str]:
    meta = meta or json.loads((out / "meta.json").read_text())
    return [verdict_text(v) for v in verdicts(meta, load_trials(out))]


def _heat_rows(meta: dict, vs: list[dict]) -> list[str]:
    """The heat-map's rows: the engine's models, then the peers (and their variants such as
    node-cluster) that the run's experiments measured."""
    names = [m["name"] for m in meta.get("models") or [] if m.get("name")]
    seen = {a for v in vs for a in v["cells"]}
    rows = [n for n in names if n in seen]
    peers = set(PEER_FEATURES)
    for v in vs:
        for a in v["cells"]:
            if a not in rows and (a in peers or (a.split("-")[0] in peers
                                                 and a.split("-")[0] not in names)):
                rows.append(a)
    # With no model list (a report rebuilt elsewhere): every alternative seen twice or more.
    if not rows:
        count: dict[str, int] = defaultdict(int)
        for v in vs:
            for a in v["cells"]:
                count[a] += 1
        rows = [a for a in count if count[a] >= 2]
    return rows


def _heat_colour(goodness: float) -> str:
    """1 (the best) green, 1/4 of the best or worse red, on a log scale between."""
    import math
    g = min(1.0, max(goodness, 1e-9))
    t = min(1.0, -math.log(g) / math.log(4))  # 0 best .. 1 four times worse
    hue = 120 * (1 - t)
    return f"hsl({hue:.0f},65%,{72 - 10 * (1 - t):.0f}%)"


def _bound_text(v: dict) -> str:
    b = v.get("bound", "")
    word = {">=": "≥ a lower bound", "<=": "≤ an upper bound",
            "?": "both bounds: no ranking"}.get(b)
    s = f"<span class='warn bound'>{word}</span>: " if word else ""
    if v.get("partial"):
        s += "<span class='warn partial'>† not every alternative or point ran</span>: "
    return s


def _ours_vs_peer_cell(v: dict) -> str:
    if "ours" not in v:
        return "—"
    ge = {">=": "≥ ", "<=": "≤ ", "?": "? "}.get(v.get("ours_vs_peer_bound", ""), "")
    return (f"{ge}{html.escape(_ratio_text(v['ours_vs_peer']))}<br><small>"
            f"{html.escape(v['ours'])} vs {html.escape(v['peer'])}</small>")


def verdict_section(meta: dict, trials: list[dict]) -> str:
    vs = verdicts(meta, trials)
    rows = []
    for v in vs:
        if "best" not in v:
            rows.append(f"<tr class='verdict-row' data-experiment='{html.escape(v['experiment'])}'>"
                        f"<td>{html.escape(v['question'])}<br><small>{html.escape(v['experiment'])}"
                        f"</small></td><td colspan='5'>—</td><td>{html.escape('; '.join(v['marks']))}"
                        "</td></tr>")
            continue
        ge = {">=": "≥ ", "<=": "≤ ", "?": "? "}.get(v.get("bound", ""), "")
        ratio_word = "worst / best" if v["lower_better"] else "best / worst"
        trials_txt = ""
        if "trials" in v:
            trials_txt = f"<br><small>{v['trials']} trials"
            if v.get("at_max"):
                trials_txt += f"; {v['at_max']} point(s) stopped at the maximum"
            trials_txt += "</small>"
        rows.append(
            f"<tr class='verdict-row' data-experiment='{html.escape(v['experiment'])}'>"
            f"<td>{html.escape(v['question'])}<br><small><a href='#exp-{html.escape(v['experiment'])}'>"
            f"{html.escape(v['experiment'])}</a></small></td>"
            f"<td>{html.escape(v['metric_label'])}<br><small>{html.escape(v['point'] or '')}</small></td>"
            f"<td><b>{html.escape(v['best'])}</b><br><small>{v['best_value'].fmt()}</small></td>"
            f"<td>{html.escape(v['worst'])}<br><small>{v['worst_value'].fmt()}</small></td>"
            f"<td>{ge}{html.escape(_ratio_text(v['ratio']))}<br><small>{ratio_word}</small>"
            f"{trials_txt}</td>"
            f"<td class='ours-vs-peer'>{_ours_vs_peer_cell(v)}</td>"
            f"<td>{_bound_text(v)}"
            f"{html.escape('; '.join(v['marks']))}</td></tr>")
    table = ("<table class='verdicts'><tr><th>question</th><th>measure, at</th><th>best</th>"
             "<th>worst</th><th>worst vs best (median ratio [95% CI])</th>"
             "<th>our best model vs the best peer (above 1: ours ahead)</th><th>marks</th></tr>"
             + "".join(rows) + "</table>")
    cols = [v for v in vs if "best" in v]
    heat = ""
    hrows = _heat_rows(meta, cols)
    if cols and hrows:
        head = "".join(
            f"<th title='{html.escape(v['metric_label'])} at {html.escape(v['point'] or '')}; best: "
            f"{html.escape(v['best'])}'>{html.escape(v['experiment'])}<br><small>"
            f"{'cost' if v['lower_better'] else 'rate'}</small></th>" for v in cols)
        body = []
        for a in hrows:
            cells = []
            for v in cols:
                c = v["cells"].get(a)
                if not c:
                    cells.append("<td class='heat-empty'>–</td>")
                    continue
                rel = c["rel"]
                good = (1 / rel.median if v["lower_better"] else rel.median) if rel.median else 0
                ci = (f"[{rel.lo:.2f}, {rel.hi:.2f}]" if c["n"] >= 2 and rel.lo != rel.hi
                      else "n=1")
                tip = (f"{a}, {v['experiment']}: {v['metric_label']} {c['median'].fmt()}; "
                       f"{rel.median:.2f}x the best ({v['best']}) {ci}, {c['n']} trial(s)"
                       + ("; generator-invalid trials only" if c["flagged"] else ""))
                mark = "*" if c["flagged"] else ""
                cells.append(f"<td class='heat' style='background:{_heat_colour(good)}' "
                             f"title='{html.escape(tip)}'>{rel.median:.2f}{mark}<br><small>"
                             f"{html.escape(ci)}</small></td>")
            body.append(f"<tr><td><b>{html.escape(a)}</b></td>{''.join(cells)}</tr>")
        heat = ("<h3>Models by workload</h3><p class='small'>Each cell: the model's figure divided by the best "
                "in its column (1.00 = the best; a rate below 1 is slower, a cost above 1 is "
                "dearer), the ratio's 95% CI under it and in the tooltip; green is the best, red "
                "four times worse or more; * generator-invalid trials only (a lower bound).</p>"
                f"<table class='heatmap'><tr><th>model</th>{head}</tr>{''.join(body)}</table>")
    return ("<section id='verdicts'><h2>Verdicts</h2><p>One row per experiment: at one point "
            "of its sweep, the best and the worst alternative by the experiment's main measure, "
            "and the ratio of their medians with its 95% bootstrap CI. ≥ marks a lower bound and ≤ an "
            "upper one (the generator, not the server, set a figure: it could not send more); "
            "† a verdict over fewer alternatives or points than the experiment declares "
            "(skipped here, or the machine too small). Where an experiment has both, our best "
            "model (the engine's models and their variants, the Eve programs) is set against "
            "the best peer (Go, Node.js, Erlang, Elixir, Rust; OpenMP, TBB and Java for the "
            "tasks): above 1 ours is ahead, below 1 the peer is.</p>"
            + heat + table + "</section>")


def _stops_table(exp: dict, stops: list[dict]) -> str:
    mine = [s for s in stops if s["experiment"] == exp["name"]]
    if not mine:
        return ""
    rows = "".join(f"<tr><td>{html.escape(s['alternative'])}</td><td>{html.escape(s['point'])}</td>"
                   f"<td>{s['n']}</td><td>{html.escape(s['reason'])}</td>"
                   f"<td>{html.escape(s['text'])}</td></tr>" for s in mine)
    counts: dict[str, int] = defaultdict(int)
    for s in mine:
        counts[s["reason"]] += 1
    why = ", ".join(f"{n} {r}" for r, n in sorted(counts.items()))
    return (f"<details><summary>Trials per point and why they stopped ({sum(s['n'] for s in mine)}"
            f" trials; {html.escape(why)})</summary><p>The rule watches "
            f"{html.escape(mine[0]['metric'])}: an alternative's ratio to "
            f"{html.escape(str(mine[0]['reference']))} until its CI is within ±"
            f"{exp.get('ci_width', 0.05):.0%}, between {exp.get('repetitions')} and "
            f"{exp.get('max_repetitions', exp.get('repetitions'))} trials.</p>"
            "<table><tr><th>alternative</th><th>point</th><th>trials</th><th>stopped</th>"
            f"<th>why</th></tr>{rows}</table></details>")
