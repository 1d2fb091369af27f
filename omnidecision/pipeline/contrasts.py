"""The planned contrasts of the experiment, with intervals that count training noise (start → replicate → task).

    python -c "from omnidecision.pipeline.contrasts import contrast_section; help(contrast_section)"

`contrast_section` is the one place the summary's contrasts are computed: it calls the project's statistics
(`omnidecision.stats`: `hierarchical_contrast`, `hierarchical_mean`, `holm`; `omnidecision.eval.plots`:
`forest_plot`). Outcomes come in the nested shape `{start: {replicate: {task_id: 0/1}}}` per arm
(summary.nested_outcomes); an arm trained once per start (sft, the references) has one replicate, "r0", compared
with the mean of the other arm's replicates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omnidecision.eval.plots import forest_plot
from omnidecision.rollout.deprecated import aliases
from omnidecision.stats import ContrastEstimate, hierarchical_contrast, hierarchical_mean, holm
from omnidecision.stats import paired_in_loop as _paired_in_loop

logger = logging.getLogger(__name__)

Nested = Mapping[str, Mapping[str, Mapping[str, float]]]


def per_task_mean(nested: dict[str, Any]) -> dict[str, float]:
    """task → mean over replicates (one start): what the paired per-task comparison reads."""
    (reps,) = nested.values()
    tasks = set.intersection(*(set(r) for r in reps.values()))
    return {t: sum(r[t] for r in reps.values()) / len(reps) for t in sorted(tasks)}


def paired_rows(paired: list[dict[str, Any]]) -> list[str]:
    rows = ["| a | b | n | a only | b only | Δ (b − a) | 95% CI | p |", "|---|---|---|---|---|---|---|---|"]
    for p in paired:
        rows.append(f"| {p['a']} | {p['b']} | {p['n']} | {p['a_only']} | {p['b_only']} | {p['delta']:+.3f} | "
                    f"[{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] | {p['p_value']:.3g} |")
    return rows


def contrast_section(outcomes: Mapping[str, Nested], planned: list[tuple[str, str]],
                     exploratory: list[tuple[str, str]] = (), *, plot: Path | None = None, seed: int = 0,
                     n_boot: int = 2000) -> dict[str, Any]:
    """{"means": {arm: estimate}, "planned": {"b-a": estimate}, "exploratory": {...}, "method": ...}: each contrast is
    accuracy(b) − accuracy(a) with its hierarchical 95% interval and per-replicate deltas; exploratory contrasts
    carry Holm-adjusted p-values. `plot`: the forest plot of the planned contrasts is written there."""
    missing = sorted({n for pair in (*planned, *exploratory) for n in pair} - set(outcomes))
    if missing:
        raise ValueError(f"contrasts name arms without outcomes: {missing} (arms: {sorted(outcomes)})")

    def one(a: str, b: str) -> dict[str, Any]:  # hierarchical_contrast(x, y) is x − y
        return hierarchical_contrast(outcomes[b], outcomes[a], n_boot=n_boot, seed=seed).model_dump()

    planned_out = {f"{b}-{a}": one(a, b) for a, b in planned}
    explore = {f"{b}-{a}": one(a, b) for a, b in exploratory if f"{b}-{a}" not in planned_out}
    adjusted = holm({k: v["p_value"] for k, v in explore.items()}) if explore else {}
    for k, v in explore.items():
        v["p_holm"] = adjusted[k]
    if plot is not None and planned_out:
        forest_plot({k: ContrastEstimate.model_validate(v) for k, v in planned_out.items()}, plot)
    means = {a: hierarchical_mean(outcomes[a], n_boot=n_boot, seed=seed).model_dump() for a in outcomes}
    return {"method": "hierarchical (omnidecision.stats: start → replicate → task)", "means": means,
            "planned": planned_out, "exploratory": explore, "level": 0.95}


# paired_in_loop was a wrapper here while the pipeline loaded omnidecision.stats inside functions only
__getattr__ = aliases(__name__, {"paired_in_loop": "omnidecision.stats.paired_in_loop"},
                      {"omnidecision.stats.paired_in_loop": _paired_in_loop})
