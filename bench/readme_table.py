"""The benchmark table, generated from bench/results/*.json (no hand-copied figure): the documentation site's
benchmark reference (docs/reference/benchmarks.md, written by `python -m docgen` at every `make docs`).

    python -m bench.readme_table            # print the table (Markdown)

One row per result file: the baseline and the candidate with the median (and min–max) of the figure the ratio is
taken on, the ratio with its per-repeat range, the number of repeats and what "better" means.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.schema import BenchResult, Measure, load_result

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def fmt(x: float | None) -> str:
    """A figure as the table shows it: 4 significant digits, thousands separated.

    >>> fmt(1234.5678), fmt(0.00012345), fmt(None), fmt(5.0)
    ('1,235', '0.0001234', '–', '5')
    """
    if x is None:
        return "–"
    if x != 0 and abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{float(f'{x:.4g}'):g}" if abs(x) >= 1e-4 or x == 0 else f"{x:.4g}"


def span(m: Measure) -> str:
    return f"{fmt(m.median)} ({fmt(m.min)} to {fmt(max(m.values))})"


def others(r: BenchResult) -> str:
    """The candidate's other figures (vs the baseline's, where it has them; medians), and the other arms on the
    metric."""
    cand, base = r.arms[r.candidate], r.arms[r.baseline]
    parts = [f"{k}: {fmt(m.median)}" + (f" vs {fmt(base.figures[k].median)}" if k in base.figures else "")
             for k, m in cand.figures.items() if k != r.metric]
    parts += [f"{name} ({arm.label}): {fmt(arm.figures[r.metric].median)} {arm.figures[r.metric].unit}"
              for name, arm in r.arms.items() if name not in (r.candidate, r.baseline) and r.metric in arm.figures]
    return "; ".join(parts) or "–"


def row(r: BenchResult) -> str:
    cand, base = r.arms[r.candidate], r.arms[r.baseline]
    known = [x for x in r.ratio_repeats if x is not None]
    rng = f" ({fmt(min(known))} to {fmt(max(known))})" if known else ""
    how = "median of per-repeat ratios" if r.ratio_method == "median_of_repeat_ratios" else "ratio of medians"
    unit = cand.figures[r.metric].unit
    return (f"| `{r.benchmark}.json` | {r.metric} [{unit}] | {base.label}: {span(base.figures[r.metric])} | "
            f"{cand.label}: {span(cand.figures[r.metric])} | **{fmt(r.ratio)}**{rng}, {how} | {r.repeats} | "
            f"{r.better} | {others(r)} |")


def table(results: list[BenchResult]) -> str:
    head = ["| result | figure | baseline: median (min to max) | candidate: median (min to max) | "
            "candidate / baseline (per-repeat range) | repeats | better | other figures, candidate vs baseline "
            "(medians) |",
            "|---|---|---|---|---|---|---|---|"]
    lines = head + [row(r) for r in sorted(results, key=lambda r: r.benchmark)]
    for r in results:
        if r.benchmark.startswith("grpo_signal"):
            lines += ["", *signal_lines(r)]
    return "\n".join(lines)


SIGNAL_FIGURES = (("closure_gain", "held-out closure-reward gain"), ("accuracy_gain", "in-loop dev accuracy gain"),
                  ("cpu_s", "CPU-seconds used"), ("optimizer_steps", "optimizer steps"),
                  ("decisions_with_signal_per_cpu_s", "decisions with a non-zero advantage per CPU-second"))


def signal_lines(r: BenchResult) -> list[str]:
    """The grpo_signal result's own figures, arm by arm (median, min–max over repeats)."""
    start = r.details.get("start", {})
    outcomes = ", ".join(f"{k} {v}" for k, v in start.get("dev_outcomes", {}).items())
    lines = [f"`{r.benchmark}.json`, median (min to max) over {r.repeats} repeats; the start planner: dev closure "
             f"reward {fmt(start.get('dev_closure'))}, in-loop dev accuracy {fmt(start.get('dev_accuracy'))} "
             f"({r.details.get('dev_tasks')} tasks; outcomes: {outcomes or '–'}); budget "
             f"{fmt(r.details.get('budget_cpu_s'))} CPU-s per arm and repeat:", ""]
    lines += ["| figure | " + " | ".join(r.arms[a].label for a in (r.candidate, r.baseline)) + " |", "|---|---|---|"]
    for key, label in SIGNAL_FIGURES:
        if all(key in r.arms[a].figures for a in (r.candidate, r.baseline)):
            lines.append(f"| {label} | " + " | ".join(span(r.arms[a].figures[key]) for a in (r.candidate, r.baseline))
                         + " |")
    for key, what in (("closure_gain", "the dev closure reward"), ("accuracy_gain", "the in-loop dev accuracy")):
        counts = []
        for a in (r.candidate, r.baseline):
            vals = r.arms[a].figures[key].values if key in r.arms[a].figures else []
            counts.append(f"{a}-level raised {what} in {sum(v > 0 for v in vals)} of {len(vals)} repeats "
                          f"(lowered it in {sum(v < 0 for v in vals)})")
        lines += ["", "; ".join(counts) + "."]
    acc = r.details.get("accuracy_ratio_of_medians")
    lines += ["", f"Ratio on in-loop accuracy gain per CPU-second (ratio of medians): {fmt(acc)}."
              + ("" if r.ratio is not None else f" No closure ratio: {r.ratio_note}.")]
    return lines


def load_all(folder: Path = RESULTS) -> list[BenchResult]:
    return [load_result(p) for p in sorted(folder.glob("*.json"))]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    print(table(load_all()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
