"""The teacher-data curve: the experiment with the amount of teacher data as a dimension (issue 57).

    omnidecision experiment --config configs/experiment/teacher-curve.yaml --out runs/curve --dry-run
    omnidecision experiment --config configs/experiment/teacher-curve.yaml --out runs/curve \
        --results docs/results/teacher-curve.json
    python -m omnidecision.pipeline.curve docs/results/teacher-curve.json \
        --page docs/research/teacher-curve-result.md --plot docs/results/teacher-curve.png
    python -m omnidecision.pipeline.curve docs/results/sft-sized.json --title "SFT sized to its data" \
        --page docs/research/sft-sized-result.md --plot docs/results/sft-sized.png   # declared in sft-sized.md

A curve recipe (`ExperimentRecipe.teacher_tasks`) runs one demo folder per cell (N, start) under `OUT/n-N/seed-S`:
the teacher's runs cover the first N train tasks; everything else is the experiment's protocol (replicates, planned
contrasts, budgets, restart: a cell with a `summary.json` and every step of its plan recorded is kept). Each N is
pooled on its own (`experiment.pool`), the teacher's runs of each cell are counted and priced (`teacher_cost`), and
the headline declared in the recipe is read (`headline`): the smallest N at which the best of the declared RL arms
matches SFT at the largest N (the lower end of the 95% interval of their difference above −`curve_margin`). The
test suite of a start is the same at every N, so that difference is paired per (start, task). A recipe that runs the
fixed-steps SFT beside the sized one (`sft_fixed`, issue 64) gets its declared goals on the page first
(`sized_rows`).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from pathlib import Path
from typing import Any

import typer

from omnidecision.outputs import report_out
from omnidecision.pipeline.arms import ARMS
from omnidecision.pipeline.experiment import pool, write_result
from omnidecision.pipeline.plan import build_plan
from omnidecision.pipeline.restart import finished_cell, kept_steps, read_state
from omnidecision.pipeline.scheduler import dry_run as plan_dry_run
from omnidecision.pipeline.scheduler import run_plan
from omnidecision.pipeline.summary import summarise, units
from omnidecision.provenance import git_revision
from omnidecision.rollout.store import load_records
from omnidecision.stats import hierarchical_contrast
from omnidecision.view import write_view

logger = logging.getLogger(__name__)


def cell_folder(out: Path, n: int | None, start: int) -> Path:
    """A cell's demo folder: `OUT/n-N/seed-S` in a curve, `OUT/seed-S` otherwise (the plain experiment's layout)."""
    return (out / f"n-{n}" / f"seed-{start}") if n is not None else out / f"seed-{start}"


def run_cells(recipe: Any, out: Path, jobs: int, dry_run: bool, executor: str = "local",
              sbatch_args: list[str] | None = None) -> dict[int | None, list[tuple[dict, Path]]]:
    """Run (or, with `dry_run`, print) every (N, start) cell's plan. A finished cell (`restart.finished_cell`: a
    `summary.json`, every step of its plan recorded) is kept and summarised again from its files, so its figures
    follow the current report and statistics code; a started one, or one finished under a smaller plan, keeps its
    finished steps (restart.kept_steps) and runs the rest. The dry run prints what the run would do and
    exits with the run's refusal (a cell another runner holds). N -> the cells' (summary, folder); N is None
    outside a curve."""
    arms = recipe.arm_table()
    cells: dict[int | None, list[tuple[dict, Path]]] = {}
    refusals: list[str] = []
    for n, start in recipe.cells():
        folder = cell_folder(out, n, start).resolve()
        cfg = recipe.start_config(start, n)
        plan = build_plan(cfg, folder, arms)
        finished = finished_cell(plan, folder)  # kept whole, whatever its steps' files
        if dry_run:  # what the run below would do, asked of the same functions
            cell = f"# cell: teacher_tasks={n if n is not None else recipe.train_tasks}, start={start}"
            if finished:
                print(f"{cell}: finished ({folder / 'summary.json'}): kept, nothing runs", file=report_out())
                continue
            text, refusal = plan_dry_run(plan, folder, recipe.threads, executor, sbatch_args)
            kept = kept_steps(plan, folder)
            print(cell + (f": {len(kept)} of {len(plan)} steps finished in an earlier run, kept" if kept else ""),
                  file=report_out())
            if refusal is not None:  # the run stops at this cell: one runner per folder
                print(f"# refused now: {refusal}", file=report_out())
                refusals.append(refusal)
            print(text, file=report_out())
            continue
        # a finished cell's times with its groups' wall times (the total counts a group's steps once)
        times = read_state(folder / "stage_wall_s.json") if finished else \
            run_plan(plan, folder, jobs, recipe.threads, executor, sbatch_args)
        cells.setdefault(n, []).append((summarise(folder, cfg, times, arms), folder))
    if refusals:
        raise typer.Exit(refusals[0])
    return cells


def write_curve(recipe: Any, cells: dict[int | None, list[tuple[dict, Path]]], out: Path, results: Path | None
                ) -> str:
    """Pool the curve's cells, write OUT/experiment.json (and `results`) and the plot OUT/curve.png, put the plot at
    the top of every cell's viewer index; return the result's page."""
    done = {n: d for n, d in cells.items() if n is not None}
    curve = pool_curve(recipe, done)
    curve["git_revision"] = git_revision()
    write_result(curve, out, results)
    plot_curve(curve, out / "curve.png")
    for index in write_curve_view(done, out / "curve.png"):
        logger.info("the curve plot heads %s", index)
    return curve_page(curve, str(results or out / "experiment.json"),
                      declaration=f"{results.stem}.md" if results is not None else "teacher-curve.md")


def write_curve_view(cells: dict[int, list[tuple[dict, Path]]], plot: Path) -> list[Path]:
    """The curve plot at the top of every cell's viewer index (OUT/n-N/seed-S/view, written by the cell's `view`
    step): the index is rewritten over the same evaluation folders, the run and side-by-side pages are kept. One site
    over every cell's runs would pair every two sources that ran a test task (the cells of a start share their test
    suite): hundreds of thousands of side-by-side pages at 12 cells. Returns the rewritten index files."""
    written = []
    for n, done in sorted(cells.items()):
        for summary, folder in done:
            if not (folder / "view" / "index.html").is_file():
                continue  # a cell run without the report steps (`checks: false`) has no viewer
            argv = (((summary.get("provenance") or {}).get("steps") or {}).get("view") or {}).get("argv") or []
            sources = argv[1:argv.index("--out")] if "--out" in argv else \
                [str(d) for d in sorted((folder / "eval").glob("*/test"))]
            written.append(write_view(sources, folder / "view", title=f"Test runs of the curve's cell N={n}, start "
                                      f"{folder.name.removeprefix('seed-')}", figures=[plot], pages=False))
    return written


def teacher_cost(folder: Path, price_per_call: float) -> dict[str, Any]:
    """The teacher's collected runs of one cell (train and dev), counted from their trajectory files and priced at
    `price_per_call` per tool call. Dev runs are the same at every N (checkpoint choice reads them): kept apart."""
    out: dict[str, Any] = {}
    for split in ("train", "dev"):
        runs = tool_calls = planner_calls = tokens = 0
        seen: set[str] = set()
        for rec in load_records(folder / f"collect-{split}"):
            runs += 1
            seen.add(rec.task_id)
            tool_calls += sum(rec.totals.tool_calls.values())
            planner_calls += len(rec.steps)
            tokens += rec.totals.prompt_tokens + rec.totals.completion_tokens
        tasks = len(seen)
        out[split] = {"runs": runs, "tasks": tasks, "tool_calls": tool_calls, "planner_calls": planner_calls,
                      "tokens": tokens, "usd": round(tool_calls * price_per_call, 4)}
    return out


def headline(by_n: dict[int, dict[str, Any]], outcomes: dict[int, dict[str, Any]], rl_arms: list[str],
             margin: float, *, seed: int = 0) -> dict[str, Any]:
    """At each N, each declared RL arm against SFT at the largest N (hierarchical, paired per start and task); the
    smallest N at which the best of them (highest pooled mean at that N) matches: low > −margin."""
    top = max(by_n)
    reference = outcomes[top]["sft"]
    rows: dict[str, Any] = {}
    smallest: int | None = None
    for n in sorted(by_n):
        means = by_n[n]["pooled_accuracy"]
        present = [a for a in rl_arms if a in outcomes[n]]
        if not present:
            continue
        best = max(present, key=lambda a: (means.get(a) or 0.0, -rl_arms.index(a)))
        contrasts = {a: hierarchical_contrast(outcomes[n][a], reference, seed=seed).model_dump() for a in present}
        match = contrasts[best]["low"] > -margin
        # the goal (reported beside the declared headline, not instead of it): the same arm against sft at
        # every larger N, so "SFT+RL at N matches SFT alone at 2N or more" is read off the file
        larger = {}
        for m in sorted(k for k in by_n if k > n and "sft" in outcomes[k]):
            c = hierarchical_contrast(outcomes[n][best], outcomes[m]["sft"], seed=seed)
            larger[str(m)] = {"estimate": c.estimate, "low": c.low, "high": c.high, "matches": c.low > -margin}
        rows[str(n)] = {"best": best, "contrasts": contrasts, "matches": match, "versus_sft_at": larger,
                        "largest_sft_matched": max((int(m) for m, c in larger.items() if c["matches"]), default=None)}
        if match and smallest is None:
            smallest = n
    return {"reference": f"sft at N={top}", "margin": margin, "by_n": rows, "smallest_n": smallest,
            "teacher_runs_saved_fraction": None if smallest is None else round(1 - smallest / top, 4)}


def arm_cost(recipe: Any, n: int, done: list[tuple[dict[str, Any], Path]], means: dict[str, dict[str, float]]
             ) -> dict[str, Any]:
    """What each post-SFT arm's training cost at one N, and per point of gain over sft.

    An arm's cost is its own steps' wall time at one thread (its training step and, for a control, its selection
    step), averaged over the cells' replicates: one thread pinned to one core, so CPU seconds where the machine is
    not oversubscribed, more where other work shared the core (the result's machine time per cell says how loaded).
    Steps that several arms share (the judge's training, the SFT planner's own runs) are reported apart, not charged
    to an arm.
    For an executed-reward arm the share its executions took (`executed_cost.json`) is reported beside: executions
    run inside the GRPO process, so they are already in the step's time. Seconds per point = cost / (100 × gain),
    None when the gain over sft is not above 0 (no finite price of a gain that did not happen). `kept_start`: of an
    RL arm's replicates, how many the checkpoint policy ended at step 0, i.e. the SFT planner itself (its
    `checkpoint_selection.json`): such a replicate scores what sft scores by construction."""
    shared_steps = ("judge-train", "collect-own", "harvest-own")
    rows: dict[str, Any] = {}
    sft = (means.get("sft") or {}).get("estimate")
    for arm in recipe.arm_table():
        if not arm.served or arm.group == "sft":
            continue
        per_rep, executed, kept = [], [], []
        for s, folder in done:
            times = s.get("stage_wall_s") or {}
            cfg = recipe.start_config(int(s.get("seed", 0)), n)
            for key, name in units(arm, cfg):
                if name in times:
                    per_rep.append(times[name] + times.get(f"{name}-select", 0.0))
                cost = ((s.get("planners") or {}).get(arm.name) or {}).get("executed_cost") or {}
                if key in cost and cost[key].get("cpu_s") is not None:
                    executed.append(cost[key]["cpu_s"])
                choice = folder / "models" / f"{name}-run" / "checkpoint_selection.json"
                if choice.is_file():
                    kept.append(json.loads(choice.read_text("utf-8")).get("chosen_step") == 0)
        if not per_rep:
            continue
        step_s = sum(per_rep) / len(per_rep)
        gain = None if sft is None or arm.name not in means else means[arm.name]["estimate"] - sft
        rows[arm.name] = {"step_s": round(step_s, 1), "replicates": len(per_rep),
                          "gain_over_sft": None if gain is None else round(gain, 4),
                          "step_s_per_point": round(step_s / (100 * gain), 1) if gain and gain > 0 else None,
                          "execution_cpu_s": round(sum(executed) / len(executed), 1) if executed else None,
                          "kept_start": f"{sum(kept)}/{len(kept)}" if kept else None}
    summaries = [s for s, _ in done]
    shared = {k: round(sum((s.get("stage_wall_s") or {}).get(k, 0.0) for s in summaries) / len(summaries), 1)
              for k in shared_steps if any(k in (s.get("stage_wall_s") or {}) for s in summaries)}
    return {"arms": rows, "shared_steps_s": shared}


def pool_curve(recipe: Any, cells: dict[int, list[tuple[dict[str, Any], Path]]]) -> dict[str, Any]:
    """The curve's result: each N pooled as the experiment pools its starts, the teacher's cost per N (mean over the
    starts' cells), and the declared headline."""
    by_n, outcomes, cost = {}, {}, {}
    for n, done in sorted(cells.items()):
        summaries, folders = [s for s, _ in done], [f for _, f in done]
        by_n[n] = pool(summaries, folders, recipe)
        outcomes[n] = by_n[n]["outcomes"]
        by_n[n]["arm_cost"] = arm_cost(recipe, n, done, (by_n[n].get("contrasts") or {}).get("means", {}))
        per_cell = [teacher_cost(f, recipe.teacher_price_per_call) for f in folders]
        cost[n] = {split: {k: round(sum(c[split][k] for c in per_cell) / len(per_cell), 4)
                           for k in per_cell[0][split]} for split in ("train", "dev")}
    return {"kind": "teacher-curve", "recipe": recipe.model_dump(), "teacher_tasks": sorted(by_n),
            "price": {"per_tool_call_usd": recipe.teacher_price_per_call, "source": recipe.teacher_price_source},
            "by_n": {str(n): v for n, v in by_n.items()}, "teacher_cost": {str(n): v for n, v in cost.items()},
            "headline": headline(by_n, outcomes, recipe.curve_rl_arms, recipe.curve_margin),
            "secondary": secondary(by_n)}


def secondary(by_n: dict[int, dict[str, Any]], headroom: float = 0.15) -> dict[str, Any]:
    """The declared secondary reading: at the smallest N where sft leaves headroom (its pooled mean at least
    `headroom` below the rule planner's), which RL arms beat sft with a planned interval above 0, and grpo_own's
    gain as a fraction of grpo_judge's (their planned contrasts against sft)."""
    for n in sorted(by_n):
        means = (by_n[n].get("contrasts") or {}).get("means", {})
        if "sft" not in means or "rule" not in means:
            continue
        if means["rule"]["estimate"] - means["sft"]["estimate"] < headroom:
            continue
        planned = by_n[n]["contrasts"].get("planned", {})
        gains = {k.removesuffix("-sft"): v for k, v in planned.items() if k.endswith("-sft")}
        own, judge = gains.get("grpo_own"), gains.get("grpo_judge")
        ratio = None if own is None or judge is None or judge["estimate"] <= 0 else own["estimate"] / judge["estimate"]
        return {"n": n, "headroom": headroom, "sft": means["sft"]["estimate"], "rule": means["rule"]["estimate"],
                "beat_sft": sorted(a for a, v in gains.items() if v["low"] > 0),
                "own_over_judge_gain": None if ratio is None else round(ratio, 3),
                "own_over_judge_reason": None if ratio is not None else
                "grpo_judge's gain over sft is not above 0 (or a contrast is missing): no fraction to take"}
    return {"n": None, "headroom": headroom, "reason": f"sft is within {headroom} of the rule planner at every N"}


def _means(result: dict[str, Any], n: str) -> dict[str, dict[str, float]]:
    return (result["by_n"][n].get("contrasts") or {}).get("means", {})


def curve_table(result: dict[str, Any]) -> list[str]:
    """One row per arm, one column per N: the hierarchical mean and its 95% interval."""
    ns = [str(n) for n in result["teacher_tasks"]]
    arms = list(result["by_n"][ns[0]]["per_seed_accuracy"])
    rows = ["| arm | " + " | ".join(f"N={n}" for n in ns) + " |", "|---|" + "---|" * len(ns)]
    for arm in arms:
        cells = []
        for n in ns:
            m = _means(result, n).get(arm)
            cells.append("–" if m is None else f"{m['estimate']:.3f} [{m['low']:.3f}, {m['high']:.3f}]")
        rows.append(f"| {arm} | " + " | ".join(cells) + " |")
    return rows


def per_start_table(result: dict[str, Any]) -> list[str]:
    """Each arm's test accuracy per start (replicates averaged) at each N: the spread behind the intervals."""
    ns = [str(n) for n in result["teacher_tasks"]]
    starts = result["by_n"][ns[0]]["seeds"]
    rows = ["| N | arm | " + " | ".join(f"start {s}" for s in starts) + " |", "|---|---|" + "---|" * len(starts)]
    for n in ns:
        b = result["by_n"][n]
        for arm, per in b["per_seed_accuracy"].items():
            rows.append(f"| {n} | {arm} | " + " | ".join(f"{v:.3f}" for v in per) + " |")
    return rows


def count(value: float) -> str:
    """A count (or a mean of counts over starts) for reading: thousands separated, one decimal only where it has one.

    >>> count(2327860.3), count(95.6667), count(30)
    ('2,327,860', '95.7', '30')
    """
    return f"{value:,.0f}" if value >= 1000 or float(value).is_integer() else f"{value:,.1f}"


def cost_table(result: dict[str, Any]) -> list[str]:
    rows = ["| N | teacher runs (train) | tool calls | tokens | USD (train) | USD (dev, every N) |",
            "|---|---|---|---|---|---|"]
    for n in (str(n) for n in result["teacher_tasks"]):
        c = result["teacher_cost"][n]
        rows.append(f"| {n} | {count(c['train']['runs'])} | {count(c['train']['tool_calls'])} | "
                    f"{count(c['train']['tokens'])} | {c['train']['usd']:.2f} | {c['dev']['usd']:.2f} |")
    return rows


def arm_cost_table(result: dict[str, Any]) -> list[str]:
    """Per N and post-SFT arm: step seconds per replicate, the gain over sft, step seconds per point of gain."""
    rows = ["| N | arm | step s per replicate | gain over sft | step s per point of gain | of which executions | "
            "checkpoint kept the start |", "|---|---|---|---|---|---|---|"]
    for n in (str(n) for n in result["teacher_tasks"]):
        for arm, c in ((result["by_n"][n].get("arm_cost") or {}).get("arms") or {}).items():
            gain = "–" if c["gain_over_sft"] is None else f"{c['gain_over_sft']:+.3f}"
            per = "– (no gain)" if c["step_s_per_point"] is None else f"{c['step_s_per_point']:g}"
            ex = "–" if c["execution_cpu_s"] is None else f"{c['execution_cpu_s']:g}"
            kept = c.get("kept_start") or "–"
            rows.append(f"| {n} | {arm} | {c['step_s']:g} | {gain} | {per} | {ex} | {kept} |")
    return rows


def time_table(result: dict[str, Any]) -> list[str]:
    """The machine time of each (N, start) cell: its wall seconds with `jobs` steps side by side, on which CPU."""
    rows = ["| N | start | wall s | CPU | jobs × threads |", "|---|---|---|---|---|"]
    for n in (str(n) for n in result["teacher_tasks"]):
        b = result["by_n"][n]
        for seed, wall, prov in zip(b["seeds"], b["wall_s"], b.get("provenance") or [{}] * len(b["seeds"]),
                                    strict=True):
            rows.append(f"| {n} | {seed} | {wall:g} | {prov.get('cpu') or '–'} | "
                        f"{prov.get('jobs', '–')} × {prov.get('threads', '–')} |")
    return rows


def contrast_table(result: dict[str, Any]) -> list[str]:
    rows = ["| N | contrast | estimate | 95% interval | p |", "|---|---|---|---|---|"]
    for n in (str(n) for n in result["teacher_tasks"]):
        for k, v in ((result["by_n"][n].get("contrasts") or {}).get("planned") or {}).items():
            rows.append(f"| {n} | {k} | {v['estimate']:+.3f} | [{v['low']:+.3f}, {v['high']:+.3f}] | "
                        f"{v['p_value']:.3g} |")
    return rows


def headline_rows(result: dict[str, Any]) -> list[str]:
    h = result["headline"]
    rows = [f"Reference: {h['reference']}; an RL arm matches when the lower end of its 95% interval is above "
            f"−{h['margin']:g}.", "", "| N | best declared RL arm | its difference to the reference | 95% interval "
            "| matches |", "|---|---|---|---|---|"]
    for n, v in h["by_n"].items():
        c = v["contrasts"][v["best"]]
        rows.append(f"| {n} | {v['best']} | {c['estimate']:+.3f} | [{c['low']:+.3f}, {c['high']:+.3f}] | "
                    f"{'yes' if v['matches'] else 'no'} |")
    rows += ["", "Smallest N that matches: " + ("none" if h["smallest_n"] is None else
                                                f"{h['smallest_n']} (teacher runs saved: "
                                                f"{h['teacher_runs_saved_fraction']:.0%})")]
    return rows


def goal_rows(result: dict[str, Any]) -> list[str]:
    """Beside the declared headline: the best declared RL arm at N against sft at every larger N, and the secondary
    reading at the smallest N with headroom (a gain ratio beside the contrast that bounds it)."""
    h = result["headline"]
    rows = ["| N | best declared RL arm | against sft at N' | difference | 95% interval | matches |",
            "|---|---|---|---|---|---|"]
    for n, v in h["by_n"].items():
        for m, c in (v.get("versus_sft_at") or {}).items():
            rows.append(f"| {n} | {v['best']} | {m} | {c['estimate']:+.3f} | [{c['low']:+.3f}, {c['high']:+.3f}] | "
                        f"{'yes' if c['matches'] else 'no'} |")
    s = result.get("secondary") or {}
    if s.get("n") is None:
        rows += ["", f"Secondary reading: {s.get('reason', 'not computed')}."]
    else:
        frac = (f"{s['own_over_judge_gain']:.2f}" if s["own_over_judge_gain"] is not None
                else s["own_over_judge_reason"])
        c = (((result["by_n"].get(str(s["n"])) or {}).get("contrasts") or {}).get("exploratory") or {}).get(
            "grpo_own-grpo_judge")
        if c is not None and s["own_over_judge_gain"] is not None:  # a ratio of point estimates, with its contrast
            frac += (f" (a ratio of point estimates; the contrast grpo_own − grpo_judge: {c['estimate']:+.3f} "
                     f"[{c['low']:+.3f}, {c['high']:+.3f}], exploratory)")
        rows += ["", f"Secondary reading at N = {s['n']}, the smallest N where sft ({s['sft']:.3f}) is at least "
                 f"{s['headroom']:g} below the rule planner ({s['rule']:.3f}): RL arms above sft with an interval "
                 f"above 0: {', '.join(s['beat_sft']) or 'none'}; grpo_own's gain as a fraction of grpo_judge's: "
                 f"{frac}."]
    return rows


def sized(result: dict[str, Any]) -> bool:
    """A curve that sizes SFT to its data (issue 64): its recipe runs the fixed-steps SFT beside the sized one."""
    return all("sft_fixed" in b["per_seed_accuracy"] and "teacher" in b["per_seed_accuracy"]
               for b in result["by_n"].values())


def sd(values: list[float]) -> float | None:
    """The between-start standard deviation (n - 1 in the denominator; None under two starts).

    >>> round(sd([0.583, 0.242, 0.450]), 3)
    0.172
    """
    return statistics.stdev(values) if len(values) >= 2 else None


def at_or_above_teacher(per_seed: dict[str, list[float | None]], arm: str) -> int:
    """How many starts `arm` scores at least its teacher at (`per_seed_accuracy`: arm → accuracy per start)."""
    return sum(a is not None and t is not None and a >= t for a, t in zip(per_seed[arm], per_seed["teacher"],
                                                                            strict=True))


def half_width(contrast: dict[str, float]) -> float:
    """Half the width of a contrast's 95% interval."""
    return (contrast["high"] - contrast["low"]) / 2


def sized_rows(result: dict[str, Any], goal_sd: float = 0.06, goal_half_width: float = 0.05) -> list[str]:
    """The declared goals of a sized-SFT curve, each computed from the file and reported as met or not: per N, the
    starts where sft (and sft_fixed) is at or above its teacher; the between-start sd of both at the smallest N
    (goal: sft's at most `goal_sd`); the planned contrasts' half-widths at the largest N (goal: at most
    `goal_half_width`), each beside the replicates the checkpoint policy ended at their start."""
    ns = [str(n) for n in result["teacher_tasks"]]
    rows = ["| N | planner | starts at or above the teacher | between-start sd | goal met |", "|---|---|---|---|---|"]
    for n in ns:
        acc = result["by_n"][n]["per_seed_accuracy"]
        for arm in ("sft", "sft_fixed"):
            at = at_or_above_teacher(acc, arm)
            spread = sd([a for a in acc[arm] if a is not None])
            goal = "–" if arm != "sft" else ("yes" if at == len(acc[arm]) else "no") + " (every start)"
            if arm == "sft" and n == ns[0] and spread is not None:
                goal += f"; sd ≤ {goal_sd:g}: {'yes' if spread <= goal_sd else 'no'}"
            rows.append(f"| {n} | {arm} | {at} of {len(acc[arm])} | "
                        f"{'–' if spread is None else f'{spread:.3f}'} | {goal} |")
    rows += ["", "| N | planned contrast | half-width of its 95% interval | goal met (largest N) | "
             "replicates ended at the start (a, b) |", "|---|---|---|---|---|"]
    for n in ns:
        b = result["by_n"][n]
        ended = b.get("ended_at_start") or {}
        for k, v in ((b.get("contrasts") or {}).get("planned") or {}).items():
            half = half_width(v)
            met = (f"{'yes' if half <= goal_half_width else 'no'} (≤ {goal_half_width:g})" if n == ns[-1] else "–")
            a, c = k.split("-", 1)
            rows.append(f"| {n} | {k} | {half:.3f} | {met} | {ended.get(a, '–')}, {ended.get(c, '–')} |")
    return rows


def curve_page(result: dict[str, Any], result_path: str, plot: str | None = None,
               title: str = "The teacher-data curve", declaration: str = "teacher-curve.md") -> str:
    """The docs page of a curve result (every table generated from the file; tests/demo/test_curve.py checks).
    `declaration`: the page, beside this one, that declared the recipe and its reading."""
    lines = [f"# {title}: the result", "",
             f"Generated from `{result_path}` by `python -m omnidecision.pipeline.curve {result_path} --page ...`; "
             f"the declaration and the reading are [{declaration}]({declaration}).", ""]
    if plot:
        lines += ["## The curve", "", f"![accuracy against teacher runs and dollars]({plot})", ""]
    if sized(result):
        lines += ["## The declared goals of sized SFT", "",
                  "A trained planner is at or above its teacher at a start when its test accuracy there is at least "
                  "the teacher's (the teacher whose runs it learned from); sd over starts with n − 1.", "",
                  *sized_rows(result), ""]
    lines += ["## Headline (declared before the run)" if not sized(result) else
              "## The teacher curve's headline (its reading, reported beside the goals)", "",
              *headline_rows(result), "",
              "## SFT+RL at N against sft at a larger N (reported beside the headline, not instead of it)", "",
              "Margin as in the headline; every larger N's sft as the reference in turn.", "", *goal_rows(result), "",
              "## Accuracy per arm and N (hierarchical mean, 95% interval over start → replicate → task)", "",
              *curve_table(result), "", "## Accuracy per start (replicates averaged)", "", *per_start_table(result),
              "", "## Planned contrasts at each N", "", *contrast_table(result), "",
              "## What each arm's training cost", "",
              "Wall seconds of each arm's own steps at one thread (CPU seconds where the core was not shared: see the "
              "machine time per cell), mean over replicates; steps several arms share (the judge, the SFT planner's "
              "own runs) are not charged to an arm. Executions of an executed reward run inside its GRPO step and are "
              "part of its time (their CPU seconds beside it).", "", *arm_cost_table(result), "",
              "## Machine time per cell", "", *time_table(result), "",
              "## The teacher's cost", "",
              f"Price: {result['price']['per_tool_call_usd']} USD per teacher tool call "
              f"({result['price']['source']}).", "", *cost_table(result), ""]
    return "\n".join(lines)


# drawn dashed, without bands: they bound the arms, they are not arms (the arm table's references, and oracle_sft,
# the rule-label ceiling)
REFERENCES = frozenset({a.name for a in ARMS if a.kind == "reference"} | {"oracle_sft"})


def plot_curve(result: dict[str, Any], path: Path) -> None:
    """Accuracy against teacher runs (left) and teacher dollars (right): one line per arm with its 95% band; the
    references (teacher, rule, oracle_sft) dashed without a band, so the arms' bands stay readable."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [str(n) for n in result["teacher_tasks"]]
    arms = list(result["by_n"][ns[0]]["per_seed_accuracy"])
    xs = {"teacher runs on the train tasks (N)": [result["teacher_cost"][n]["train"]["runs"] for n in ns],
          "teacher USD on the train tasks (N)": [result["teacher_cost"][n]["train"]["usd"] for n in ns]}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
    for ax, (label, x) in zip(axes, xs.items(), strict=True):
        for arm in arms:
            ms = [_means(result, n).get(arm) for n in ns]
            if any(m is None for m in ms):
                continue
            if arm in REFERENCES:
                ax.plot(x, [m["estimate"] for m in ms], linestyle="--", linewidth=1, marker=".", label=arm)
                continue
            (line,) = ax.plot(x, [m["estimate"] for m in ms], marker="o", label=arm)
            ax.fill_between(x, [m["low"] for m in ms], [m["high"] for m in ms], color=line.get_color(), alpha=0.10)
        ax.set_xscale("log")
        # ticks at the measured points only, named by their N (log-scale minor labels would overlap)
        ticks = [f"{v:g}\n(N={n})" if "runs" in label else f"${v:.0f}\n(N={n})" for v, n in zip(x, ns, strict=True)]
        ax.set_xticks(x, ticks)
        ax.minorticks_off()
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy in the loop (95% band)")
    axes[0].set_ylim(0, 1.05)
    axes[1].legend(fontsize=8, loc="lower right", ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Write the docs page (and the plot) of a teacher-curve result file.")
    ap.add_argument("result", type=Path, help="the curve's result file (experiment --results)")
    ap.add_argument("--page", type=Path, required=True, help="the markdown page to write")
    ap.add_argument("--plot", type=Path, default=None, help="the curve plot (PNG) to write and show on the page")
    ap.add_argument("--title", default="The teacher-data curve", help="the page's title, before ': the result'")
    ap.add_argument("--declaration", default=None,
                    help="the declaration page beside PAGE (default: the result file's name as .md)")
    args = ap.parse_args(argv)
    result = json.loads(args.result.read_text("utf-8"))
    if result.get("kind") != "teacher-curve":
        raise SystemExit(f"{args.result}: not a teacher-curve result (kind {result.get('kind')!r})")
    plot_ref = None
    if args.plot is not None:
        plot_curve(result, args.plot)
        plot_ref = str(Path("..") / args.plot.relative_to(args.page.parent.parent)) \
            if args.plot.is_relative_to(args.page.parent.parent) else str(args.plot)
    declaration = args.declaration or f"{args.result.stem}.md"
    args.page.write_text(curve_page(result, str(args.result), plot_ref, args.title, declaration), "utf-8")
    print(f"wrote {args.page}" + (f" and {args.plot}" if args.plot else ""))


if __name__ == "__main__":
    main()
