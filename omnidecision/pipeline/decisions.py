"""The decision rates of the planners in the demo's and the experiment's summaries (one start; pooled over starts).

    python -c "from omnidecision.pipeline.decisions import decision_rates; help(decision_rates)"

Every eval report carries `decisions` (omnidecision/eval/decisions.py: at states where a need's last call came back
without the value and another listed source is untried, the rate of repeating the same (need, tool); at states
where a blocking need can still advance, the rate of finishing). Here, per arm: the mean of its replicates' rates,
each replicate's rate, states and events summed, and per family the pooled rate; the experiment pools them over
starts (`start:replicate` keys). The pipeline loads other packages lazily (tests/architecture).
"""

from __future__ import annotations

import logging
from typing import Any

from omnidecision.eval.decisions import KINDS

logger = logging.getLogger(__name__)


def decision_rates(per_replicate: dict[str, dict[str, Any] | None]) -> dict[str, Any] | None:
    """The eval reports' decision diagnostics (eval/decisions.py) of one arm: per kind the mean of the replicates'
    rates (those with such a state), each replicate's rate, and the states and events summed over replicates; per
    family the pooled rate (events / states over replicates). None when no report has them (an older report)."""
    reps = {k: d for k, d in per_replicate.items() if d}
    if not reps:
        return None
    out: dict[str, Any] = {}
    for kind in KINDS:
        rates = {k: d[kind]["rate"] for k, d in reps.items()}
        known = [r for r in rates.values() if r is not None]
        out[kind] = {"rate": round(sum(known) / len(known), 4) if known else None, "replicates": rates,
                     "states": sum(d[kind]["states"] for d in reps.values()),
                     "events": sum(d[kind]["events"] for d in reps.values())}
    families: dict[str, dict[str, list[int]]] = {}
    for d in reps.values():
        for fam, cell in (d.get("by_category") or {}).items():
            for kind in KINDS:
                tally = families.setdefault(fam, {}).setdefault(kind, [0, 0])
                tally[0] += cell[kind]["events"]
                tally[1] += cell[kind]["states"]
    out["by_family"] = {fam: {kind: {"rate": round(e / n, 4) if n else None, "states": n, "events": e}
                              for kind, (e, n) in kinds.items()} for fam, kinds in sorted(families.items())}
    return out


def decision_rows(decisions: dict[str, dict[str, Any] | None]) -> list[str]:
    """Markdown rows of the decision rates per planner (mean over replicates; each replicate's rate)."""
    rows = ["| planner | repeat after empty | per replicate | states | finish while advanceable | per replicate | "
            "states |", "|---|---|---|---|---|---|---|"]

    def rate(v: float | None) -> str:
        return "–" if v is None else f"{v:.3f}"

    for name, d in decisions.items():
        if not d:
            continue
        cells = []
        for kind in ("repeat_after_empty", "premature_finish"):
            reps = ", ".join(rate(v) for v in d[kind]["replicates"].values())
            cells += [rate(d[kind]["rate"]), reps, str(d[kind]["states"])]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def pooled_decisions(summaries: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """Per arm, the decision rates (eval/decisions.py) over every start and replicate: the mean of the per-replicate
    rates, each one keyed `start:replicate`, states and events summed; per family the pooled rate (None: no
    summary has them)."""
    return {n: _pool_one(summaries, n) for n in names}


def _pool_one(summaries: list[dict[str, Any]], n: str) -> dict[str, Any] | None:
    found = [(str(s["seed"]), s["planners"][n].get("decisions")) for s in summaries]
    return merge_rates([(seed, d) for seed, d in found if d])


def merge_rates(found: list[tuple[str | None, dict[str, Any]]]) -> dict[str, Any] | None:
    """Decision rates pooled over parts: the mean of the per-replicate rates (keyed `prefix:replicate`, or as they
    are where the prefix is None: parts already pooled), states and events summed, per family events/states."""
    if not found:
        return None
    out: dict[str, Any] = {}
    for kind in KINDS:
        rates = {(f"{seed}:{k}" if seed is not None else k): v for seed, d in found
                 for k, v in d[kind]["replicates"].items()}
        known = [v for v in rates.values() if v is not None]
        out[kind] = {"rate": round(sum(known) / len(known), 4) if known else None, "replicates": rates,
                     "states": sum(d[kind]["states"] for _, d in found),
                     "events": sum(d[kind]["events"] for _, d in found)}
    families: dict[str, dict[str, list[int]]] = {}
    for _, d in found:
        for fam, kinds in d.get("by_family", {}).items():
            for kind, cell in kinds.items():
                tally = families.setdefault(fam, {}).setdefault(kind, [0, 0])
                tally[0] += cell["events"]
                tally[1] += cell["states"]
    out["by_family"] = {fam: {kind: {"rate": round(e / t, 4) if t else None, "states": t, "events": e}
                              for kind, (e, t) in kinds.items()} for fam, kinds in sorted(families.items())}
    return out
