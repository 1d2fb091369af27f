"""The planned contrasts of the experiment, with intervals that count training noise (start → replicate → task).

    python -c "from omnidecision.pipeline.contrasts import contrast_section; help(contrast_section)"

`contrast_section` is the one place the summary's contrasts are computed: it calls the project's statistics
(`omnidecision.stats`: `hierarchical_contrast`, `hierarchical_mean`, `holm`; `omnidecision.eval.plots`:
`forest_plot`). Outcomes come in the nested shape `{start: {replicate: {task_id: 0/1}}}` per arm
(summary.nested_outcomes); an arm trained once per start (sft, the references) has one replicate, "r0", compared
with the mean of the other arm's replicates.

TODO-merge: until the `stats` branch lands, `omnidecision.stats` lacks those names; `_fallback` below then
computes a cluster bootstrap (starts, then replicates within a start, then tasks, all resampled) of the same shape,
marked `"method": "fallback"` in the result, and no forest plot is written. Delete the fallback after the merge.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

Nested = Mapping[str, Mapping[str, Mapping[str, float]]]


def paired_in_loop(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """The per-task paired comparison (exact McNemar, bootstrap CI), wherever the stats module keeps it."""
    try:
        from omnidecision.stats import paired_in_loop as impl  # after the stats branch's merge of eval/stats.py
    except ImportError:  # TODO-merge: drop this branch
        from omnidecision.eval.stats import paired_in_loop as impl
    return impl(*args, **kwargs)


def _stats() -> Any | None:
    try:
        from omnidecision.stats import hierarchical_contrast, hierarchical_mean, holm
    except ImportError:  # TODO-merge
        return None
    try:  # the stats branch keeps the plot with the other plots
        from omnidecision.eval.plots import forest_plot
    except ImportError:
        try:
            from omnidecision.stats import forest_plot
        except ImportError:
            forest_plot = None
    return hierarchical_contrast, hierarchical_mean, holm, forest_plot


def _fallback(a: Nested, b: Nested, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """TODO-merge: a cluster bootstrap of mean(b − a) over shared starts: starts resampled, then within a start the
    replicates of each arm and the tasks (paired: the same tasks for both arms)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    starts = sorted(set(a) & set(b))
    if not starts:
        raise ValueError("contrast: the two arms share no start")
    shared = {s: sorted(set.intersection(*(set(r) for r in (*a[s].values(), *b[s].values())))) for s in starts}
    grid = {s: tuple(np.array([[reps[k][t] for t in shared[s]] for k in sorted(reps)], dtype=float)
                     for reps in (a[s], b[s])) for s in starts}  # (replicates × tasks) per arm

    def boot_means(x: Any, tasks: Any) -> Any:
        per_rep = x[:, tasks].mean(axis=2)  # replicates × n_boot: each replicate on the resampled tasks
        pick = rng.integers(0, x.shape[0], size=(n_boot, x.shape[0]))
        return np.take_along_axis(per_rep.T, pick, axis=1).mean(axis=1)

    per_start = {}
    for s in starts:
        xa, xb = grid[s]
        tasks = rng.integers(0, xa.shape[1], size=(n_boot, xa.shape[1]))
        per_start[s] = boot_means(xb, tasks) - boot_means(xa, tasks)
    which = rng.integers(0, len(starts), size=(n_boot, len(starts)))
    boots = np.stack([per_start[s] for s in starts], axis=1)
    boots = np.take_along_axis(boots, which, axis=1).mean(axis=1)
    estimate = float(np.mean([grid[s][1].mean() - grid[s][0].mean() for s in starts]))
    low, high = (float(np.quantile(boots, q)) for q in ((1 - level) / 2, (1 + level) / 2))
    p = float(min(1.0, 2 * min(np.mean(boots <= 0), np.mean(boots >= 0))))
    per_rep = [{"start": s, "replicate": k, "delta": round(float(grid[s][1][i].mean() - grid[s][0].mean()), 4)}
               for s in starts for i, k in enumerate(sorted(b[s]))]
    return {"estimate": round(estimate, 4), "low": round(low, 4), "high": round(high, 4),
            "half_width": round((high - low) / 2, 4), "p_value": round(p, 4), "per_replicate": per_rep,
            "method": "fallback"}


def _holm_fallback(pvalues: Mapping[str, float]) -> dict[str, float]:
    """TODO-merge: Holm's step-down adjustment."""
    order = sorted(pvalues, key=lambda k: pvalues[k])
    out, running = {}, 0.0
    for i, k in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * pvalues[k]))
        out[k] = round(running, 6)
    return out


def contrast_section(outcomes: Mapping[str, Nested], planned: list[tuple[str, str]],
                     exploratory: list[tuple[str, str]] = (), *, plot: Path | None = None, seed: int = 0,
                     n_boot: int = 2000) -> dict[str, Any]:
    """{"means": {arm: estimate}, "planned": {"b-a": estimate}, "exploratory": {...}, "method": ...}: each contrast is
    accuracy(b) − accuracy(a) with its hierarchical 95% interval and per-replicate deltas; exploratory contrasts
    carry Holm-adjusted p-values. `plot`: the forest plot of the planned contrasts is written there."""
    stats = _stats()
    method = "hierarchical (omnidecision.stats)" if stats else "fallback cluster bootstrap (TODO-merge)"

    def one(a: str, b: str) -> dict[str, Any]:
        if stats:
            est = stats[0](outcomes[b], outcomes[a], n_boot=n_boot, seed=seed)  # delta = first − second
            return est.model_dump() if hasattr(est, "model_dump") else dict(est)
        return _fallback(outcomes[a], outcomes[b], n_boot=n_boot, seed=seed)

    def mean(a: str) -> dict[str, Any]:
        if stats:
            est = stats[1](outcomes[a], n_boot=n_boot, seed=seed)
            return est.model_dump() if hasattr(est, "model_dump") else dict(est)
        zero = {s: {r: dict.fromkeys(t, 0.0) for r, t in reps.items()} for s, reps in outcomes[a].items()}
        return _fallback(zero, outcomes[a], n_boot=n_boot, seed=seed)  # TODO-merge: mean(a) − 0

    missing = sorted({n for pair in (*planned, *exploratory) for n in pair} - set(outcomes))
    if missing:
        raise ValueError(f"contrasts name arms without outcomes: {missing} (arms: {sorted(outcomes)})")
    planned_out = {f"{b}-{a}": one(a, b) for a, b in planned}
    explore = {f"{b}-{a}": one(a, b) for a, b in exploratory if f"{b}-{a}" not in planned_out}
    adjust = stats[2] if stats else _holm_fallback
    holm = dict(adjust({k: v["p_value"] for k, v in explore.items()})) if explore else {}
    for k, v in explore.items():
        v["p_holm"] = holm[k]
    if plot is not None and stats and stats[3] is not None and planned_out:
        from omnidecision.stats import ContrastEstimate

        stats[3]({k: ContrastEstimate.model_validate(v) for k, v in planned_out.items()}, plot)
    return {"method": method, "means": {a: mean(a) for a in outcomes}, "planned": planned_out,
            "exploratory": explore, "level": 0.95}
