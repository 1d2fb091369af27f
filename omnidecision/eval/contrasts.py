"""The experiment's contrasts as a markdown table: the planned ones (declared in the recipe before the run) with
their hierarchical intervals, the exploratory ones with Holm-adjusted p-values and marked so, and for each planned
contrast whose interval covers 0 the effect size the experiment can exclude.

    python -c "from omnidecision.eval.contrasts import contrast_table_md; help(contrast_table_md)"

The estimates come from `omnidecision.stats.hierarchical_contrast`; the plot beside the table from
`omnidecision.eval.plots.forest_plot`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from omnidecision.stats import ContrastEstimate, excludable_effect, holm, min_detectable_effect

logger = logging.getLogger(__name__)

HEADER = ["| contrast | Δ | {level} CI | half-width | p | {p2}starts | replicates | tasks | variance counted |",
          "|---|---|---|---|---|{d2}---|---|---|---|"]


def _level(groups: list[Mapping[str, ContrastEstimate]]) -> float:
    levels = {c.level for g in groups for c in g.values()}
    if len(levels) > 1:
        raise ValueError(f"contrast_table_md: the contrasts have different interval levels {sorted(levels)}")
    return levels.pop() if levels else 0.95


def _row(name: str, c: ContrastEstimate, holm_p: float | None = None) -> str:
    extra = "" if holm_p is None else f" {holm_p:.3g} |"
    return (f"| {name} | {c.estimate:+.3f} | [{c.low:+.3f}, {c.high:+.3f}] | {c.half_width:.3f} | {c.p_value:.3g} |"
            f"{extra} {c.n_starts} | {c.n_replicates_a} vs {c.n_replicates_b} | {c.n_tasks} | {', '.join(c.levels)} |")


def contrast_table_md(planned: Mapping[str, ContrastEstimate], exploratory: Mapping[str, ContrastEstimate]) -> str:
    """Markdown: the planned contrasts' table and, per planned contrast whose interval covers 0, what it excludes
    (`excludable_effect`, and the effect it would detect with 80% power, `min_detectable_effect`); then the
    exploratory contrasts with Holm-adjusted p-values (over the exploratory family), each marked "(exploratory)";
    then the estimates' notes (e.g. one start: the start level is not counted)."""
    level = _level([planned, exploratory])
    pct = f"{level:.0%}"
    lines: list[str] = []
    if planned:
        lines += [f"Planned contrasts (declared before the run; {pct} hierarchical intervals over SFT start → RL "
                  "replicate → task; claims only where the interval excludes 0):", "",
                  HEADER[0].format(level=pct, p2=""), HEADER[1].format(d2=""),
                  *(_row(n, c) for n, c in planned.items()), ""]
        for name, c in planned.items():
            if c.low <= 0 <= c.high:
                lines.append(f"- {name}: the interval covers 0; the experiment excludes |Δ| > "
                             f"{excludable_effect(c):.3f} (the effect it would detect with 80% power: "
                             f"{min_detectable_effect(c):.3f}).")
            else:
                lines.append(f"- {name}: the interval excludes 0 (Δ {'>' if c.low > 0 else '<'} 0).")
        lines.append("")
    if exploratory:
        adjusted = holm({n: c.p_value for n, c in exploratory.items()})
        lines += [f"Exploratory contrasts (not planned: p-values Holm-adjusted over these {len(exploratory)}; "
                  "read as leads, not findings):", "",
                  HEADER[0].format(level=pct, p2="p (Holm) | "), HEADER[1].format(d2="---|"),
                  *(_row(f"{n} (exploratory)", c, adjusted[n]) for n, c in exploratory.items()), ""]
    notes = [f"- {n}: {c.note}" for n, c in {**planned, **exploratory}.items() if c.note]
    if notes:
        lines += ["Notes:", "", *notes, ""]
    return "\n".join(lines)
