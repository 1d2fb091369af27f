"""PNG plots of eval reports and of the experiment's contrasts (matplotlib, Agg backend: no display needed).

    python -c "import json; from omnidecision.eval.plots import report_plots; \
report_plots(json.load(open('runs/eval/report.json')), 'runs/eval')"

`forest_plot` draws `omnidecision.stats.hierarchical_contrast` results: one row per contrast.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omnidecision.stats import ContrastEstimate

logger = logging.getLogger(__name__)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def report_plots(rep: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """outcomes.png, tool_calls.png, prompt_tokens.png, attribution.png for one report."""
    plt = _plt()
    out = Path(out_dir)
    paths = []

    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = list(rep["outcomes"])
    ax.bar(names, [rep["outcomes"][k] for k in names], color="#4c72b0")
    for i, k in enumerate(names):
        acc = rep["accuracy_by_outcome"][k]
        if acc is not None:
            ax.annotate(f"{100 * acc:.0f}% correct", (i, rep["outcomes"][k]), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("runs")
    ax.set_title(f"outcomes (n={rep['n']}, accuracy {100 * (rep['accuracy'] or 0):.1f}%)")
    paths.append(_save(fig, out / "outcomes.png"))

    fig, ax = plt.subplots(figsize=(6, 3.5))
    tools = {k: v for k, v in rep["tool_calls_per_question"].items() if k != "total" and v is not None}
    ax.barh(list(tools), list(tools.values()), color="#55a868")
    ax.set_xlabel("calls per question")
    ax.set_title("tool calls per question")
    paths.append(_save(fig, out / "tool_calls.png"))

    fig, ax = plt.subplots(figsize=(6, 3.5))
    by_step = rep["prompt_tokens_per_step"]["by_step"]
    ax.plot([int(k) for k in by_step], list(by_step.values()), marker="o")
    ax.set_xlabel("planner step")
    ax.set_ylabel("prompt tokens (mean)")
    ax.set_title("planner prompt tokens per step")
    paths.append(_save(fig, out / "prompt_tokens.png"))

    fig, ax = plt.subplots(figsize=(6, 3.5))
    att = rep["attribution"]
    ax.barh(list(att), list(att.values()), color="#c44e52")
    ax.set_xlabel("incorrect runs")
    ax.set_title("failure attribution: what stayed open")
    paths.append(_save(fig, out / "attribution.png"))
    return paths


def compare_plot(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Accuracy with Wilson 95% CI error bars, one bar per run."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4, 1.4 * len(rows)), 3.5))
    names = [r["name"] for r in rows]
    acc = [r["accuracy"] or 0.0 for r in rows]
    low = [a - r["ci95"][0] for a, r in zip(acc, rows, strict=True)]
    high = [r["ci95"][1] - a for a, r in zip(acc, rows, strict=True)]
    err = [[max(0.0, x) for x in low], [max(0.0, x) for x in high]]
    ax.bar(names, acc, yerr=err, capsize=4, color="#8172b2")
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy (Wilson 95% CI)")
    ax.set_title("comparison")
    return _save(fig, Path(path))


def forest_plot(contrasts: Mapping[str, ContrastEstimate], path: Path) -> Path:
    """A forest plot, one row per contrast (in the mapping's order, top down): the per-replicate deltas as points
    (one colour per SFT start), the hierarchical interval as a bar with the estimate on it, and a line at 0."""
    if not contrasts:
        raise ValueError("forest_plot: no contrast to draw")
    plt = _plt()
    names = list(contrasts)
    starts = sorted({r.start for c in contrasts.values() for r in c.per_replicate})
    colour = {s: plt.get_cmap("tab10")(i % 10) for i, s in enumerate(starts)}
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.55 * len(names)))
    for i, name in enumerate(names):
        c, y = contrasts[name], len(names) - 1 - i
        for j, s in enumerate(starts):  # each start's points on their own sub-row, so they do not hide each other
            xs = [r.delta for r in c.per_replicate if r.start == s]
            dy = 0.25 * ((j + 1) / (len(starts) + 1) - 0.5) * 2
            ax.scatter(xs, [y + dy] * len(xs), s=14, color=colour[s], alpha=0.75, zorder=2,
                       label=f"start {s}" if i == 0 else None)
        ax.plot([c.low, c.high], [y, y], color="black", linewidth=2.2, zorder=3)
        ax.plot([c.estimate], [y], marker="D", color="black", markersize=6, zorder=4)
        ax.annotate(f"{c.estimate:+.3f} [{c.low:+.3f}, {c.high:+.3f}]", (1.01, y), xycoords=("axes fraction", "data"),
                    va="center", fontsize=8)
    ax.axvline(0.0, color="grey", linestyle="--", linewidth=1, zorder=1)
    ax.set_yticks(range(len(names)), list(reversed(names)))
    ax.set_ylim(-0.7, len(names) - 0.3)
    level = {c.level for c in contrasts.values()}
    ax.set_xlabel("Δ (a − b); points: per-replicate deltas; bar: " + "/".join(f"{x:.0%}" for x in sorted(level)) +
                  " hierarchical interval")
    if starts:
        ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=min(len(starts), 6), frameon=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return _save(fig, path)
