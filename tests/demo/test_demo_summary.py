"""The demo's summary.json and tables from finished evaluations (fast; the whole demo runs in
tests/demo/test_demo_quick.py, slow): every planner's row, the paired comparisons against the controls and the
teacher, the judge's AUROC, and the experiment's pooling over seeds."""

from __future__ import annotations

import json

import pytest

from omnidecision.pipeline.arms import ARMS, pairs, planners
from omnidecision.pipeline.experiment import pool
from omnidecision.pipeline.plan import DemoConfig, build_plan
from omnidecision.pipeline.scheduler import total_wall
from omnidecision.pipeline.summary import summarise, table, units
from omnidecision.protocol.records import JudgeResult, RunRecord

PLANNERS = planners()


def _decisions(repeats: int, states: int, finishes: int = 0, blocking: int = 4) -> dict:
    """A report's `decisions` (eval/decisions.py's shape): `repeats` of `states` repeat-after-empty states."""
    def one(e: int, n: int) -> dict:
        return {"states": n, "events": e, "rate": round(e / n, 4) if n else None, "runs": n, "runs_with_event": e}

    return {"repeat_after_empty": one(repeats, states), "premature_finish": one(finishes, blocking),
            "by_category": {"source_switch": {"repeat_after_empty": one(repeats, states),
                                              "premature_finish": one(finishes, blocking)}}}


def _eval(folder, correct: list[bool], decisions: dict | None = None) -> None:
    folder.mkdir(parents=True)
    with (folder / "trajectories.jsonl").open("w") as f:
        for i, ok in enumerate(correct):
            rec = RunRecord(run_id=f"r{i}", task_id=f"t{i}", outcome="accepted" if ok else "stuck",
                            judge=JudgeResult(correct=ok))
            f.write(rec.model_dump_json() + "\n")
    k, n = sum(correct), len(correct)
    rep = {"accuracy": k / n, "ci95": [max(0.0, k / n - 0.2), min(1.0, k / n + 0.2)], "n": n,
           "outcomes": {"accepted": k, "stuck": n - k}, "invalid_action_rate": (n - k) / n,
           "by_category": {"source_switch": {"n": n, "correct": k, "accuracy": k / n, "ci95": [0.0, 1.0]}},
           "attribution": {"budget": n - k, "computation": 0}}
    if decisions is not None:
        rep["decisions"] = decisions
    (folder / "report.json").write_text(json.dumps(rep))


def _demo_folder(root, correct: dict[str, list[bool]], cfg: DemoConfig | None = None, flip: set[str] = frozenset(),
                 decisions: dict[str, dict] | None = None):
    """Evaluation folders of every arm's planners; `flip`: planners (arm.rK) whose outcomes are inverted;
    `decisions`: planner (arm.rK or arm) → its report's decision diagnostics."""
    for arm in ARMS:
        for _key, name in units(arm, cfg or DemoConfig.quick()):
            _eval(root / "eval" / name / "test", [not c for c in correct[arm.name]] if name in flip
                  else correct[arm.name], (decisions or {}).get(name))
    (root / "judge_eval.json").write_text(json.dumps({"n": 10, "positive": 6, "negative": 4, "auroc_closure": 0.61,
                                                      "auroc_judge": 0.74, "auroc_closure_plus_judge": 0.77}))
    (root / "data").mkdir()
    (root / "data" / "stats.json").write_text(json.dumps({"runs": 20, "correct_runs": 12, "sft": {"train": 50},
                                                          "rl": {"train": 90}}))


CORRECT = {"teacher": [True, False, False, True], "sft": [True, False, False, True],
           "sft_plus": [True, True, False, True], "rft": [True, True, False, False],
           "grpo": [True, True, True, False], "grpo_judge": [True, True, True, True],
           "grpo_shuffled": [True, False, True, True], "oracle_sft": [True, True, True, True],
           "grpo_own": [True, True, True, False], "rft_own": [False, True, False, True],
           "grpo_exec": [True, True, False, True],
           "rule": [True, True, True, True]}


def test_summary_has_every_planner_the_pairs_and_the_judge(tmp_path):
    _demo_folder(tmp_path, CORRECT)
    cost = {"candidates": 80, "executions": 31, "cached": 49, "cpu_s": 1.5, "tool_calls": 90, "tokens": 0}
    (tmp_path / "models" / "grpo_exec.r0-run").mkdir(parents=True)
    (tmp_path / "models" / "grpo_exec.r0-run" / "executed_cost.json").write_text(json.dumps(cost))
    summary = summarise(tmp_path, DemoConfig.quick(), {"sft": 12.0, "judge-train": 5.0, "grpo_judge.r0": 20.0})
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved == summary
    assert saved["post_sft_budget_s"] == 25.0
    for name in PLANNERS:
        assert set(saved["planners"][name]) >= {"accuracy", "ci95", "n", "outcomes", "invalid_action_rate", "data"}
    assert saved["planners"]["oracle_sft"]["data"] == "rule" and saved["planners"]["grpo_judge"]["data"] != "rule"
    # the executed reward's cost lands in the summary, per replicate; arms without one have none
    assert saved["planners"]["grpo_exec"]["executed_cost"] == {"r0": cost}
    assert saved["planners"]["grpo_judge"]["executed_cost"] == {}
    assert "| grpo_exec.r0 | 80 | 31 | 49 | 1.5 | 90 |" in table(summary)
    got = {(p["a"], p["b"]): p for p in saved["paired_in_loop"]}
    assert set(got) == set(pairs())
    p = got[("sft_plus", "grpo_judge")]  # sft_plus misses t2, grpo_judge solves all four
    assert (p["n"], p["a_only"], p["b_only"], p["delta"]) == (4, 0, 1, 0.25)
    p = got[("teacher", "rft")]  # teacher solves t0, t3; rft t0, t1
    assert (p["a_only"], p["b_only"], p["delta"]) == (1, 1, 0.0)
    text = table(summary)
    assert "| sft_plus | grpo_judge | 4 | 0 | 1 | +0.250 |" in text
    assert "| grpo_judge | emitted+reward | 1.000 |" in text
    assert "AUROC judge 0.74, closure checks alone 0.61" in text
    # the wrong runs' categories, only those that occurred
    assert saved["planners"]["teacher"]["attribution"] == {"budget": 2}
    assert saved["planners"]["rule"]["attribution"] == {}


def test_total_wall_counts_steps_side_by_side_once(tmp_path):
    plan = build_plan(DemoConfig.quick(), tmp_path)
    times = {s.name: 10.0 for s in plan}
    evals = [s.name for s in plan if s.group == "eval"]
    assert len(evals) == 13 and "eval-sft.vllm" in evals  # one per planner (one replicate), sft served by vLLM
    alone = total_wall(plan, times)  # --jobs 1: no group recorded, every step counts
    assert alone == 10.0 * len(plan)
    times["group:eval"] = 25.0  # the twelve evaluations took 25 s side by side
    assert total_wall(plan, times) == alone - 10.0 * len(evals) + 25.0


def test_a_cell_run_under_a_larger_plan_counts_its_steps_once_under_a_smaller_one(tmp_path):
    """A kept cell summarised by a recipe with fewer arms (grounded.yaml keeping the curve's cells): the steps the
    smaller plan lacks ran inside a group too, and its records say which."""
    from omnidecision.pipeline.arms import ARMS

    full = build_plan(DemoConfig.quick(), tmp_path)
    small = build_plan(DemoConfig.quick(), tmp_path, tuple(a for a in ARMS if a.name not in ("grpo_own", "rft_own")))
    extra = [s for s in full if s.name not in {t.name for t in small}]
    assert extra and all(s.group for s in extra)
    times = {s.name: 10.0 for s in full} | {f"group:{g}": 25.0 for g in {s.group for s in full if s.group}}
    records = {s.name: {"group": s.group} for s in full}
    assert total_wall(small, times, records) == total_wall(full, times)
    # without the records the extra steps count one by one on top of their groups (the error this fixes)
    assert total_wall(small, times) == total_wall(full, times) + 10.0 * len(extra)


def test_the_experiment_pools_seeds_paired_per_seed_and_task(tmp_path):
    folders, summaries = [], []
    for seed, flip in ((0, False), (1, True)):
        folder = tmp_path / f"seed-{seed}"
        correct = {n: ([not c for c in v] if flip and n == "teacher" else v) for n, v in CORRECT.items()}
        _demo_folder(folder, correct)
        cfg = DemoConfig.quick()
        cfg.seed = seed
        summaries.append(summarise(folder, cfg, {}))
        folders.append(folder)
    pooled = pool(summaries, folders)
    assert pooled["seeds"] == [0, 1] and pooled["pooled_n"]["teacher"] == 8
    assert pooled["per_seed_accuracy"]["teacher"] == [0.5, 0.5]
    got = {(p["a"], p["b"]): p for p in pooled["pooled_paired"]}
    p = got[("teacher", "grpo_judge")]
    assert (p["n"], p["a_only"], p["b_only"], p["delta"]) == (8, 0, 4, 0.5)
    # per family, pooled over seeds: every test task of both seeds is in source_switch here
    fam = pooled["pooled_by_family"]["source_switch"]
    assert fam["n"] == 8 and fam["teacher"] == 0.5 and fam["grpo_judge"] == 1.0 and fam["sft"] == 0.5


def test_a_restart_keeps_the_wall_time_of_a_group_that_finished_whole(tmp_path, monkeypatch):
    from omnidecision.pipeline import scheduler

    plan = [s for s in build_plan(DemoConfig.quick(), tmp_path) if s.group == "eval"][:2]
    for step in plan:
        for w in step.writes:
            (tmp_path / w).mkdir(parents=True, exist_ok=True)
    times = {plan[0].name: 30.0, plan[1].name: 31.0, "group:eval": 32.0, "group:gone": 5.0}
    (tmp_path / "stage_wall_s.json").write_text(json.dumps(times))
    monkeypatch.setattr(scheduler.Runner, "execute", lambda self, step, quiet=False: pytest.fail(f"ran {step.name}"))
    kept = scheduler.run_plan(plan, tmp_path)
    assert kept == {plan[0].name: 30.0, plan[1].name: 31.0, "group:eval": 32.0}
    assert total_wall(plan, kept) == 32.0


def test_replicates_are_summarised_as_their_mean_and_kept_one_by_one(tmp_path):
    cfg = DemoConfig.quick()
    cfg.replicates = 2
    # grpo_judge's second replicate inverts its outcomes: 4/4 and 0/4, mean 0.5
    _demo_folder(tmp_path, CORRECT, cfg, flip={"grpo_judge.r1"})
    summary = summarise(tmp_path, cfg, {})
    p = summary["planners"]["grpo_judge"]
    assert p["replicates"] == {"r0": 1.0, "r1": 0.0} and p["accuracy"] == 0.5 and p["n"] == 4
    assert sum(p["outcomes"].values()) == 8  # every run of both replicates counted
    nested = summary["outcomes_by_replicate"]
    assert set(nested["grpo_judge"]["0"]) == {"r0", "r1"} and set(nested["sft"]["0"]) == {"r0"}
    assert nested["grpo_judge"]["0"]["r1"] == {"t0": 0.0, "t1": 0.0, "t2": 0.0, "t3": 0.0}
    # paired per task on the mean over replicates: sft solves t0, t3; grpo_judge's mean is 0.5 on every task
    got = {(q["a"], q["b"]): q for q in summary["paired_in_loop"]}
    assert got[("sft", "grpo_judge")]["delta"] == 0.0
    assert "| grpo_judge | emitted+reward | 0.500 |" in table(summary)


def test_a_step_that_finished_is_kept_when_a_later_step_of_its_group_fails(tmp_path):
    import typer

    from omnidecision.pipeline import scheduler
    from omnidecision.pipeline.plan import Step

    ok = Step("synth", ["tasks", "synth", "--n", "2", "--seed", "0", "--out", str(tmp_path / "t")], [],
              [str(tmp_path / "t")], group="g")
    bad = Step("harvest", ["harvest", str(tmp_path / "missing"), "--out", str(tmp_path / "d")], [],
               [str(tmp_path / "d")], group="g")
    with pytest.raises(typer.Exit):
        scheduler.run_plan([ok, bad], tmp_path, jobs=1)
    saved = json.loads((tmp_path / "stage_wall_s.json").read_text())
    assert "synth" in saved and "harvest" not in saved  # a restart runs only the step that failed


def test_decision_rates_per_planner_are_the_mean_over_replicates_with_each_replicate_kept(tmp_path):
    cfg = DemoConfig.quick()
    cfg.replicates = 2
    # grpo_own repeats after an empty return in 1 of 4 states (r0) and 3 of 6 (r1); sft in 4 of 5; rft_own's
    # reports have none (an older report): no rates, no row
    decisions = {"grpo_own.r0": _decisions(1, 4, finishes=1), "grpo_own.r1": _decisions(3, 6), "sft": _decisions(4, 5),
                 "teacher": _decisions(0, 0)}
    _demo_folder(tmp_path, CORRECT, cfg, decisions=decisions)
    summary = summarise(tmp_path, cfg, {})
    own = summary["planners"]["grpo_own"]["decisions"]
    assert own["repeat_after_empty"]["replicates"] == {"r0": 0.25, "r1": 0.5}
    assert own["repeat_after_empty"]["rate"] == 0.375  # the mean of the replicates' rates, not 4 / 10
    assert (own["repeat_after_empty"]["states"], own["repeat_after_empty"]["events"]) == (10, 4)
    assert own["premature_finish"]["replicates"] == {"r0": 0.25, "r1": 0.0}
    assert own["premature_finish"]["rate"] == 0.125
    assert own["by_family"]["source_switch"]["repeat_after_empty"] == {"rate": 0.4, "states": 10, "events": 4}
    assert summary["planners"]["sft"]["decisions"]["repeat_after_empty"]["rate"] == 0.8
    # a planner that never met such a state has no rate (None), not 0
    assert summary["planners"]["teacher"]["decisions"]["repeat_after_empty"]["rate"] is None
    assert summary["planners"]["rft_own"]["decisions"] is None
    text = table(summary)
    assert "| grpo_own | 0.375 | 0.250, 0.500 | 10 | 0.125 | 0.250, 0.000 | 8 |" in text
    assert "| sft | 0.800 | 0.800 | 5 |" in text and "| teacher | – | – | 0 |" in text
    from omnidecision.pipeline.decisions import decision_rows

    rows = decision_rows({n: p["decisions"] for n, p in summary["planners"].items()})
    assert any(r.startswith("| grpo_own |") for r in rows) and not any(r.startswith("| rft_own |") for r in rows)
    # pooled over starts: every (start, replicate) rate kept, their mean reported
    other = tmp_path / "seed-1"
    cfg1 = DemoConfig.quick()
    cfg1.replicates, cfg1.seed = 2, 1
    _demo_folder(other, CORRECT, cfg1, decisions={"grpo_own.r0": _decisions(0, 2), "grpo_own.r1": _decisions(2, 2)})
    pooled = pool([summary, summarise(other, cfg1, {})], [tmp_path, other])
    got = pooled["decisions"]["grpo_own"]["repeat_after_empty"]
    assert got["replicates"] == {"0:r0": 0.25, "0:r1": 0.5, "1:r0": 0.0, "1:r1": 1.0}
    assert got["rate"] == 0.4375 and got["states"] == 14
    assert pooled["decisions"]["rft_own"] is None
    from omnidecision.pipeline.experiment import experiment_table

    assert "| grpo_own | 0.438 | 0.250, 0.500, 0.000, 1.000 | 14 |" in experiment_table(pooled)


def test_a_single_arm_is_summarised_from_its_one_replicate_with_its_budget_checked(tmp_path):
    from omnidecision.pipeline.plan import output_dir
    from omnidecision.pipeline.summary import budgets

    cfg = DemoConfig.quick()
    cfg.replicates, cfg.single = 3, ("sft_plus",)
    _demo_folder(tmp_path, CORRECT, cfg)
    assert [name for _, name in units(ARMS[[a.name for a in ARMS].index("sft_plus")], cfg)] == ["sft_plus.r0"]
    summary = summarise(tmp_path, cfg, {})
    assert summary["planners"]["sft_plus"]["replicates"] == {"r0": 0.75}
    assert set(summary["planners"]["rft"]["replicates"]) == {"r0", "r1", "r2"}
    assert set(summary["outcomes_by_replicate"]["sft_plus"]["0"]) == {"r0"}
    # consumed rows: sft_plus.r0 against judge-train + grpo_judge.r0; no budget row for replicates that never ran
    plan = build_plan(cfg, tmp_path)
    by = {s.name: s for s in plan}
    for name, steps, batch in (("judge-train", 5, 16), ("grpo_judge.r0", 3, 32), ("sft_plus.r0", 11, 16)):
        folder = output_dir(by[name])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": steps, "train_batch_size": batch}))
    got = budgets(plan)
    assert got["sft_plus.r0"]["reference"] == ["judge-train", "grpo_judge.r0"]
    assert got["sft_plus.r0"]["reference_rows"] == 176 and got["sft_plus.r0"]["matched"]
    assert not any(k.startswith("sft_plus.r") and k != "sft_plus.r0" for k in got)
