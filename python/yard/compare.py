"""`yard compare FULL QUICK`: does a shorter run (the quick suite) say anything a longer one
(the full suite) contradicts? (issue 41; docs/harness.md, "Quick against full")

For every experiment both runs have, every sweep point both measured and every metric the
experiment plots: each pair of alternatives whose 95% CIs do not overlap in the full run is a
ranking the full run is sure of; the quick run's medians must rank that pair the same way.
A pair the quick run ranks the other way round (or ties) is a disagreement.

A sweep variable with one value in each run (eve_echo's messages: 10000 in full, 200 in
quick) is the run's size, not a point: it is left out of the point, so the two runs' points
meet."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from .report import _groups, load_trials
from .stats import median_ci


@dataclass
class Disagreement:
    experiment: str
    point: str
    metric: str
    better: str        # the alternative the full run ranks better (by the metric's direction)
    worse: str
    full: str          # the two full-run figures, median [CI]
    quick: str         # the two quick-run medians

    def text(self) -> str:
        return (f"{self.experiment} {self.point} {self.metric}: full ranks {self.better} over "
                f"{self.worse} ({self.full}); quick does not ({self.quick})")


def _metrics(exp: dict) -> list[str]:
    ms = list(exp.get("plots") or [])
    if exp.get("metric") and exp["metric"] not in ms:
        ms.insert(0, exp["metric"])
    return ms


def _sizes(fexp: dict, qexp: dict) -> set[str]:
    """The sweep variables with a single value in both runs."""
    fs, qs = fexp.get("sweep") or {}, qexp.get("sweep") or {}
    return {k for k in fs if k in qs and len(fs[k]) == 1 and len(qs[k]) == 1}


def _rekey(groups, name: str, drop: set[str]):
    """The groups of one experiment keyed by the point without the variables in drop."""
    out: dict = {}
    for (e, a, pk), ms in groups.items():
        if e != name:
            continue
        key = ", ".join(p for p in pk.split(", ") if p.split("=", 1)[0] not in drop) or "-"
        out[(e, a, key)] = ms
    return out


def compare(full: Path, quick: Path) -> dict:
    """The pairs checked, the disagreements, and what the quick run did not measure."""
    from .report import METRICS
    fmeta = json.loads((full / "meta.json").read_text())
    qmeta = json.loads((quick / "meta.json").read_text())
    fg, qg = _groups(load_trials(full)), _groups(load_trials(quick))
    qexps = {e["name"]: e for e in qmeta.get("experiments", [])}
    checked, sure, missing = 0, 0, 0
    bad: list[Disagreement] = []
    for exp in fmeta.get("experiments", []):
        name = exp["name"]
        if name not in qexps:
            continue
        drop = _sizes(exp, qexps[name])
        fe, qe = _rekey(fg, name, drop), _rekey(qg, name, drop)
        points = sorted({pk for (_, _, pk) in fe})
        for pk, m in itertools.product(points, _metrics(exp)):
            lower = METRICS.get(m, (m, True))[1]
            fa = {a: median_ci(fe[(name, a, pk)][m]) for a in exp["alternatives"]
                  if m in fe.get((name, a, pk), {})}
            for a, b in itertools.combinations(sorted(fa), 2):
                checked += 1
                ea, eb = fa[a], fa[b]
                if ea.n < 2 or eb.n < 2 or not (ea.hi < eb.lo or eb.hi < ea.lo):
                    continue  # the full run is not sure of this pair
                sure += 1
                qa, qb = qe.get((name, a, pk), {}).get(m), qe.get((name, b, pk), {}).get(m)
                if not qa or not qb:
                    missing += 1
                    continue
                # better/worse by the full run's medians and the metric's direction
                a_better = (ea.median < eb.median) == lower
                better, worse = (a, b) if a_better else (b, a)
                mq = {a: median_ci(qa).median, b: median_ci(qb).median}
                same = mq[better] < mq[worse] if lower else mq[better] > mq[worse]
                if not same:
                    bad.append(Disagreement(
                        name, pk, m, better, worse,
                        f"{better} {fa[better].fmt()}, {worse} {fa[worse].fmt()}",
                        f"{better} {mq[better]:.4g}, {worse} {mq[worse]:.4g}"))
    return {"pairs": checked, "sure": sure, "not_in_quick": missing,
            "disagreements": bad, "full": str(full), "quick": str(quick)}


def text(res: dict) -> str:
    lines = [f"quick {res['quick']} against full {res['full']}: {res['pairs']} pairs of "
             f"alternatives at shared points; {res['sure']} with non-overlapping CIs in the full "
             f"run; {res['not_in_quick']} of those not measured by quick; "
             f"{len(res['disagreements'])} disagreement(s)"]
    lines += ["  " + d.text() for d in res["disagreements"]]
    return "\n".join(lines)
