"""The summary of one start: OUT/summary.json and the Markdown table, read from the files the commands wrote.

    omnidecision demo --out runs/demo          # writes runs/demo/summary.json and summary.md at the end
    python -c "from omnidecision.pipeline.summary import *; print(table(json.load(open('runs/demo/summary.json'))))"

Per arm (arms.py, in table order): accuracy (the mean over its replicates), 95% CI, outcomes and the report's
figures; `replicates`: each replicate's accuracy; `budget`: what each replicate's training consumed (steps, rows,
tokens: pipeline/budget.py). `outcomes_by_replicate` holds every per-task outcome in the nested shape the
hierarchical statistics read ({arm: {start: {replicate: {task: 0/1}}}}). `provenance`: the CPU, library versions
and, per step, threads and seeds (scheduler.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from omnidecision.eval.agreement import decision_agreement
from omnidecision.eval.compare import task_correct
from omnidecision.pipeline.arms import ARMS, OWN_STATES, PARITY_ARM, Arm, below_teacher, pairs, planners
from omnidecision.pipeline.budget import consumed, recipe_batch
from omnidecision.pipeline.contrasts import contrast_section, paired_rows, per_task_mean
from omnidecision.pipeline.decisions import decision_rates, decision_rows
from omnidecision.pipeline.experiment import contrast_rows, planned_contrasts
from omnidecision.pipeline.plan import DemoConfig, Step, build_plan, output_dir, unit
from omnidecision.pipeline.scheduler import total_wall
from omnidecision.stats import paired_in_loop
from omnidecision.view import write_view

logger = logging.getLogger(__name__)


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8"))


def _optional(path: Path) -> dict[str, Any] | None:
    return _read(path) if path.is_file() else None


def units(arm: Arm, cfg: DemoConfig) -> list[tuple[str, str]]:
    """(replicate key, folder name) of an arm's evaluated planners: r0.. for a replicated arm, r0 otherwise."""
    return [("r0" if k is None else f"r{k}", unit(arm, k)) for k in cfg.replicates_of(arm)]


def _planner(out: Path, arm: Arm, cfg: DemoConfig) -> dict[str, Any]:
    reps = [(key, name, _read(out / "eval" / name / "test" / "report.json")) for key, name in units(arm, cfg)]
    first = reps[0][2]
    outcomes: dict[str, int] = {}
    for _, _, rep in reps:
        for k, v in rep["outcomes"].items():
            outcomes[k] = outcomes.get(k, 0) + v
    accs = [r["accuracy"] for _, _, r in reps]
    rates = [r.get("invalid_action_rate") for _, _, r in reps]
    families: dict[str, dict[str, Any]] = {}
    for _, _, rep in reps:
        for f, v in rep.get("by_category", {}).items():
            cell = families.setdefault(f, {"n": v["n"], "acc": []})
            cell["acc"].append(v["accuracy"])
    attribution: dict[str, int] = {}
    for _, _, rep in reps:
        for k, v in (rep.get("attribution") or {}).items():
            if v:
                attribution[k] = attribution.get(k, 0) + v
    ci = first["ci95"] if len(reps) == 1 else [min(r["ci95"][0] for _, _, r in reps),
                                                max(r["ci95"][1] for _, _, r in reps)]
    return {
        "accuracy": round(sum(accs) / len(accs), 4),
        # one replicate: the report's Wilson interval; several: the span of theirs (the hierarchical interval of
        # the mean is the experiment's, over starts)
        "ci95": ci, "n": first["n"], "outcomes": outcomes,
        "invalid_action_rate": None if any(r is None for r in rates) else round(sum(rates) / len(rates), 4),
        "data": arm.provenance,
        "report": f"eval/{reps[0][1]}/test/report.json",  # relative to the demo folder (no machine path)
        "by_family": {f: {"n": c["n"], "accuracy": None if any(a is None for a in c["acc"])
                          else round(sum(c["acc"]) / len(c["acc"]), 4)} for f, c in families.items()},
        # why the wrong runs failed (eval.attribution's categories, the ones that occurred, over the replicates)
        "attribution": attribution,
        "replicates": {key: r["accuracy"] for key, _, r in reps},
        "decisions": decision_rates({key: r.get("decisions") for key, _, r in reps}),  # pipeline/decisions.py
        # what an executed reward's executions cost (grounding/reward.py writes it into the GRPO run's folder)
        "executed_cost": {key: c for key, name, _ in reps
                          if (c := _optional(out / "models" / f"{name}-run" / "executed_cost.json")) is not None},
        # the step whose weights each replicate kept (checkpoint_selection.json; 0: the checkpoint policy ended the
        # replicate at its start, the SFT planner itself)
        "chosen_step": {key: sel.get("chosen_step") for key, name, _ in reps
                        if (sel := _optional(out / "models" / f"{name}-run" / "checkpoint_selection.json"))},
    }


def nested_outcomes(out: Path, cfg: DemoConfig, arms: tuple[Arm, ...] = ARMS) -> dict[str, Any]:
    """{arm: {start: {replicate: {task_id: 0/1}}}} from the evaluation folders (the hierarchical statistics' shape)."""
    start = str(cfg.seed)
    return {arm.name: {start: {key: task_correct(out / "eval" / name / "test") for key, name in units(arm, cfg)}}
            for arm in arms}


def budgets(plan: list[Step]) -> dict[str, Any]:
    """Per trained step with a trainer_state.json: the consumed budget; per control, its reference and the check."""
    out: dict[str, Any] = {}
    for step in plan:
        if step.argv[0] not in ("sft", "grpo", "grpo-agent", "judge"):
            continue
        try:
            out[step.name] = consumed(output_dir(step)).model_dump()
        except FileNotFoundError:
            continue
    for step in plan:
        if step.budget_of and step.name in out:
            ref = sum(out[r]["rows"] for r in step.budget_of if r in out)
            batch, accum = recipe_batch(Path(step.argv[step.argv.index("--config") + 1]))
            out[step.name] |= {"reference": list(step.budget_of), "reference_rows": ref,
                               "tolerance_rows": batch * accum, "matched": 0 <= out[step.name]["rows"] - ref
                               < batch * accum}
    return out


def summarise(out: Path, cfg: DemoConfig, times: dict[str, float], arms: tuple[Arm, ...] = ARMS) -> dict[str, Any]:
    """OUT/summary.json of one start (written, and returned)."""
    plan = build_plan(cfg, out, arms)
    names = planners(arms)
    planners_out = {arm.name: _planner(out, arm, cfg) for arm in arms}
    nested = nested_outcomes(out, cfg, arms)
    correct = {n: per_task_mean(nested[n]) for n in names}
    harvest = _optional(out / "data" / "stats.json")
    own = _optional(out / OWN_STATES.split("/")[0] / "stats.json")
    judge = _optional(out / "judge_eval.json")
    steps = _optional(out / "steps.json") or {}
    summary = {
        # `single` as a list: the saved file reads back equal
        "seed": cfg.seed, "config": asdict(cfg) | {"single": list(cfg.single)}, "planners": planners_out,
        "paired_in_loop": [paired_in_loop(correct[a], correct[b], (a, b)) for a, b in pairs(arms)],
        # trained planners below the teacher whose runs they learned from (test accuracy in the loop)
        "below_teacher": below_teacher({n: p["accuracy"] for n, p in planners_out.items()}, arms),
        # the judge's figures without the machine path of the data folder (summaries are committed as results)
        "judge_eval": {k: v for k, v in judge.items() if k != "data"} if judge else None,
        "harvest": {"runs": harvest["runs"], "correct_runs": harvest["correct_runs"], "sft_rows": harvest["sft"],
                    "rl_rows": harvest["rl"]} if harvest else None,
        # the SFT planner's own runs on the train tasks (grpo_own's and rft_own's states, rl_rows.train): failed ones
        # kept too; runs and correct_runs count the teacher's dev runs as well (harvest-own's validation split)
        "own_states": {"runs": own["runs"], "correct_runs": own["correct_runs"],
                       "rl_rows": own["rl"]} if own else None,
        "budget": budgets(plan),
        # wall time of grpo_judge's post-SFT stages (its judge, its replicates): no longer any control's budget
        "post_sft_budget_s": round(sum(v for k, v in times.items() if k == "judge-train"
                                       or k.split(".")[0] == "grpo_judge"), 1),
        "outcomes_by_replicate": nested,
        "provenance": {"cpu": steps.get("cpu"), "libraries": steps.get("libraries"), "python": steps.get("python"),
                       "git_revision": steps.get("git_revision"), "jobs": steps.get("jobs"), "threads": cfg.threads,
                       "steps": steps.get("steps", {})},
        "stage_wall_s": times, "total_wall_s": total_wall(plan, times, steps.get("steps")),
        "protocol": "train/dev/test suites with distinct seeds; every arm but oracle_sft learns from the teacher's "
                    "emitted decisions in its judge-correct runs (or from rewards over the ledger); post-SFT arms "
                    "are replicated with distinct RL seeds (an arm in `single`: replicate 0 only); sft_plus and rft "
                    "train for the optimizer rows judge-train + grpo_judge consumed (same replicate), rft_own for "
                    "judge-train + grpo_own; grpo_own and rft_own train on the SFT planner's own states (its served "
                    "runs on the train tasks, no label); every step runs with a fixed thread count; the table "
                    "reports test",
    }
    # the experiment's planned contrasts at this one start (one start resolves nothing: its intervals cannot count
    # the variance between starts; the experiment's can)
    planned = [c for c in planned_contrasts() if set(c) <= set(nested)]
    explore = [p for p in pairs(arms) if p not in planned]
    summary["contrasts"] = contrast_section(nested, planned, explore, plot=out / "contrasts.png",
                                            n_boot=1000) if planned else None
    summary["serving_parity"] = serving_parity(out)
    _view_figures(plan, out / "contrasts.png")
    (out / "summary.json").write_text(json.dumps(summary, indent=2), "utf-8")
    return summary


def _view_figures(plan: list[Step], plot: Path) -> None:
    """Put the forest plot on the index of the plan's view: the view step ran before the plot existed (the plot
    needs every evaluation, the view is one of the plan's steps), so only the index is rewritten, not its pages."""
    view = next((s for s in plan if s.name == "view"), None)
    if view is None or not plot.is_file():
        return
    site = Path(view.writes[0])
    if (site / "index.html").is_file():
        reports = view.argv[1:view.argv.index("--out")]
        write_view(reports, site, figures=[plot], pages=False)


def serving_parity(out: Path) -> dict[str, Any] | None:
    """The SFT planner's test runs served by vLLM against the same planner decoded in-process (what every arm is
    evaluated with), decision by decision (omnidecision/eval/agreement.py); None when either is missing."""
    served, local = out / "eval" / f"{PARITY_ARM}.vllm" / "test", out / "eval" / PARITY_ARM / "test"
    if not ((served / "trajectories.jsonl").is_file() and (local / "trajectories.jsonl").is_file()):
        return None
    return {"planner": PARITY_ARM, "served": "vllm", "in_process": "local", **decision_agreement(served, local)}


def below_teacher_lines(flag: dict[str, Any] | None) -> list[str]:
    """The summary's line on trained planners below their teacher (nothing when none is, or without a teacher)."""
    if not flag or not flag["below"]:
        return []
    gaps = ", ".join(f"{n} {d:+.3f}" for n, d in flag["below"].items())
    return ["", f"**Below the teacher** ({flag['teacher']:.3f}, whose runs they learned from), test accuracy in the "
                f"loop: {gaps}."]


def table(summary: dict[str, Any]) -> str:
    """The summary as Markdown: planners, paired comparisons, families, the judge, budgets and wall times."""
    names = list(summary["planners"])
    rows = ["| planner | trained on | test accuracy | 95% CI | n | outcomes | invalid-action rate | replicates |",
            "|---|---|---|---|---|---|---|---|"]
    for name in names:
        p = summary["planners"][name]
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(p["outcomes"].items()) if v)
        invalid = "–" if p["invalid_action_rate"] is None else f"{p['invalid_action_rate']:.3f}"
        reps = ", ".join(f"{v:.3f}" for v in p.get("replicates", {}).values())
        rows.append(f"| {name} | {p['data']} | {p['accuracy']:.3f} | [{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}] | "
                    f"{p['n']} | {outcomes} | {invalid} | {reps} |")
    rows += below_teacher_lines(summary.get("below_teacher"))
    rows += ["", "Paired on the test tasks (exact McNemar; paired bootstrap 95% CI of b − a; a replicated arm by its "
                 "per-task mean over replicates):", "", *paired_rows(summary["paired_in_loop"])]
    families = sorted({f for p in summary["planners"].values() for f in p.get("by_family", {})})
    rows += ["", "Test accuracy per synthetic family (n tasks):", "",
             "| family | n | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for f in families:
        fam = {n: summary["planners"][n].get("by_family", {}).get(f) for n in names}
        n = next((v["n"] for v in fam.values() if v), 0)
        rows.append(f"| {f} | {n} | " + " | ".join("–" if v is None or v["accuracy"] is None
                                                  else f"{v['accuracy']:.2f}" for v in fam.values()) + " |")
    if summary.get("contrasts"):
        rows += ["", "One start resolves nothing: these intervals count replicates and tasks, not the variance "
                     "between SFT starts (`make experiment` does).", "", *contrast_rows(summary["contrasts"])]
    decisions = {n: summary["planners"][n].get("decisions") for n in names}
    if any(decisions.values()):
        rows += ["", "Decisions where the digest says what to do (eval/decisions.py): the rate of repeating the same "
                     "(need, tool) after it came back without the value while another listed source is untried, and "
                     "of finishing while a blocking need can still advance (mean over replicates):", "",
                 *decision_rows(decisions)]
    sp = summary.get("serving_parity")
    if sp:
        rows += ["", f"Serving parity: the {sp['planner']} planner served by vLLM and decoded in-process (how every "
                     f"planner is evaluated) took the same decision at {sp['steps_identical']} of {sp['steps']} "
                     f"steps; {sp['runs_identical']} of {sp['runs']} test runs identical throughout."]
    j = summary.get("judge_eval")
    if j:
        rows += ["", f"Learned judge on dev decisions (n {j['n']}, {j['positive']} moved the ledger): AUROC judge "
                     f"{j.get('auroc_judge')}, closure checks alone {j.get('auroc_closure')}, both "
                     f"{j.get('auroc_closure_plus_judge')}."]
    executed = {f"{n}.{k}": c for n in names for k, c in (summary["planners"][n].get("executed_cost") or {}).items()}
    if executed:
        rows += ["", "Executed rewards (grounding/reward.py): what executing the GRPO candidates cost:", "",
                 "| planner | candidates scored | executions | from the cache | CPU s | tool calls |",
                 "|---|---|---|---|---|---|"]
        rows += [f"| {k} | {c.get('candidates', '–')} | {c['executions']} | {c['cached']} | {c['cpu_s']:.1f} | "
                 f"{c['tool_calls']} |" for k, c in executed.items()]
    controls = {k: v for k, v in summary.get("budget", {}).items() if "reference" in v}
    if controls:
        rows += ["", "Budgets matched on consumed optimizer rows (steps × batch × grad_accum, trainer_state.json):",
                 "", "| control | steps | rows | reference | reference rows | within one batch |",
                 "|---|---|---|---|---|---|"]
        for k, v in controls.items():
            rows.append(f"| {k} | {v['steps']} | {v['rows']} | {' + '.join(v['reference'])} | {v['reference_rows']} | "
                        f"{'yes' if v['matched'] else 'NO'} |")
    prov = summary.get("provenance") or {}
    if prov.get("cpu"):
        libs = ", ".join(f"{k} {v}" for k, v in (prov.get("libraries") or {}).items() if v)
        rows += ["", f"Every step ran with {prov.get('threads')} thread(s) on {prov['cpu']} ({libs})."]
    times = ", ".join(f"{k} {v:.0f}s" for k, v in summary["stage_wall_s"].items())
    return "\n".join(rows) + f"\n\nStage wall times: {times} (total {summary['total_wall_s']:.0f}s)\n"
