"""The teacher-data curve (pipeline/curve.py, configs/experiment/teacher-curve.yaml): the recipe's checks, the dry run
of every (N, start) cell, a restart that keeps finished cells, the declared headline, and the docs page generated
from the result file (its tables match the file)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from omnidecision.pipeline import curve
from omnidecision.pipeline.curve import cell_folder, count, curve_page, headline, sd, secondary, sized, sized_rows
from omnidecision.pipeline.experiment import ExperimentRecipe, load_experiment
from omnidecision.pipeline.plan import DemoConfig, build_plan
from omnidecision.pipeline.summary import summarise, units
from omnidecision.protocol.records import JudgeResult, RunRecord, Totals

from .test_demo_summary import _eval

ROOT = Path(__file__).resolve().parents[2]
CURVE = ROOT / "configs" / "experiment" / "teacher-curve.yaml"


def _recipe(**over) -> dict:
    base = yaml.safe_load(CURVE.read_text())
    base.update(over)
    return base


def test_the_shipped_curve_recipe_declares_what_issue_57_asks():
    recipe = load_experiment(CURVE)
    assert recipe.teacher_tasks == sorted(recipe.teacher_tasks) and len(recipe.teacher_tasks) >= 3
    assert len(recipe.starts) >= 3 and recipe.replicates >= 3
    assert {"grpo_own-sft", "grpo_judge-sft", "grpo_judge-rft"} <= set(recipe.planned)
    assert recipe.curve_rl_arms and "assumption" in recipe.teacher_price_source
    assert [n for n, _ in recipe.cells()].count(recipe.teacher_tasks[0]) == len(recipe.starts)
    assert {a.name for a in recipe.arm_table()} == set(recipe.arms)


@pytest.mark.parametrize(("over", "message"), [
    ({"teacher_price_per_call": None}, "prices the teacher"),
    ({"teacher_tasks": [60, 15]}, "ascending"),
    ({"teacher_tasks": [15, 480]}, "more train tasks"),
    ({"arms": ["teacher", "sft", "rft", "grpo_own", "rft_own"], "planned": ["grpo_own-sft"]},
     "'rft' trains for what ['grpo_judge'] consumed"),
    ({"planned": ["grpo-sft"]}, "does not run"),
    ({"curve_rl_arms": ["sft"]}, "curve_rl_arms"),
])
def test_a_curve_recipe_that_cannot_run_as_declared_is_refused(over, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ExperimentRecipe.model_validate(_recipe(**over))


def test_each_cell_limits_only_the_teachers_train_runs():
    recipe = load_experiment(CURVE)
    plan = build_plan(recipe.start_config(1, 15), Path("/o"), recipe.arm_table())
    argv = {s.name: s.argv for s in plan}
    train, dev = argv["collect-train"], argv["collect-dev"]
    assert train[train.index("--tasks.limit") + 1] == "15" and "--tasks.limit" not in dev
    own = argv["collect-own"]  # the planner's own runs: the first own_tasks train tasks, whatever N
    assert own[own.index("--tasks.limit") + 1] == str(recipe.own_tasks)
    assert not any(s.name.startswith(("grpo_shuffled", "sft_plus", "eval-grpo.")) for s in plan)


def test_the_dry_run_prints_every_cell(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "omnidecision.cli", "experiment", "--config", str(CURVE),
                           "--out", str(tmp_path / "curve"), "--dry-run"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    recipe = load_experiment(CURVE)
    cells = re.findall(r"^# cell: teacher_tasks=(\d+), start=(\d+)$", proc.stdout, re.M)
    assert cells == [(str(n), str(s)) for n, s in recipe.cells()]
    limits = re.findall(r"collect --config \S+ --tasks.path \S+ --tasks.limit (\d+) ", proc.stdout)
    assert limits == [str(n) for n, _ in recipe.cells()]


def test_teacher_tasks_runs_only_the_named_n_values(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "omnidecision.cli", "experiment", "--config", str(CURVE),
                           "--teacher-tasks", "30,60", "--starts", "1", "--out", str(tmp_path / "curve"), "--dry-run"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.findall(r"^# cell: teacher_tasks=(\d+), start=(\d+)$", proc.stdout, re.M) == [("30", "1"), ("60", "1")]
    bad = subprocess.run([sys.executable, "-m", "omnidecision.cli", "experiment", "--config", str(CURVE),
                          "--teacher-tasks", "60,15", "--out", str(tmp_path / "curve"), "--dry-run"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "ascending" in bad.stderr


# -- a finished curve, read back --------------------------------------------------------------------------------------
def _cell(folder: Path, cfg: DemoConfig, arms, correct: dict[str, list[bool]], teacher_runs: int) -> None:
    for arm in arms:
        for _key, name in units(arm, cfg):
            _eval(folder / "eval" / name / "test", correct[arm.name])
    (folder / "judge_eval.json").write_text(json.dumps({"n": 4, "positive": 2, "negative": 2, "auroc_closure": 0.5,
                                                        "auroc_judge": 0.5, "auroc_closure_plus_judge": 0.5}))
    for split, runs in (("train", teacher_runs), ("dev", 3)):
        (folder / f"collect-{split}").mkdir(parents=True)
        with (folder / f"collect-{split}" / "trajectories.shard-0-of-1.jsonl").open("w") as f:
            for i in range(runs):
                rec = RunRecord(run_id=f"{split}{i}", task_id=f"{split}{i}", outcome="accepted",
                                judge=JudgeResult(correct=True),
                                totals=Totals(tool_calls={"web_search": 2, "subtitle_grounding": 1},
                                              prompt_tokens=100, completion_tokens=10))
                f.write(rec.model_dump_json() + "\n")
    # every replicate of an arm trains in 100 s (r0) or 200 s (r1); rft's selection adds 50 s; the judge 30 s
    times = {name: 100.0 * (1 + (key == "r1")) for arm in arms for key, name in units(arm, cfg)} | \
        {f"{name}-select": 50.0 for key, name in units(next(a for a in arms if a.name == "rft"), cfg)} | \
        {"judge-train": 30.0}
    # every other step of the cell's plan recorded finished too (a cell is kept whole only then)
    recorded = {s.name: 0.0 for s in build_plan(cfg, folder.resolve(), arms)} | times
    (folder / "stage_wall_s.json").write_text(json.dumps(recorded))
    for key, name in units(next(a for a in arms if a.name == "grpo_own"), cfg):  # r0 kept the start, r1 moved
        (folder / "models" / f"{name}-run").mkdir(parents=True)
        (folder / "models" / f"{name}-run" / "checkpoint_selection.json").write_text(
            json.dumps({"policy": "dev_closure", "chosen_step": 0 if key == "r0" else 20}))
    if teacher_runs == 16:  # the cells at N=16 ran their report steps: a viewer over their test runs
        from omnidecision.view import write_view

        write_view(sorted(str(d) for d in (folder / "eval").glob("*/test")), folder / "view")
    summarise(folder, cfg, times, arms)  # summary.json: the cell is finished


def test_a_restart_keeps_finished_cells_and_the_page_matches_the_result(tmp_path, monkeypatch):
    spec = _recipe(teacher_tasks=[8, 16], starts=[0, 1], replicates=2, train_tasks=16, test_tasks=6, own_tasks=8)
    recipe = ExperimentRecipe.model_validate(spec)
    path = tmp_path / "curve.yaml"
    path.write_text(yaml.safe_dump(spec))
    arms = recipe.arm_table()
    good, weak = [True] * 5 + [False], [True, True, False, True, False, False]
    for n, start in recipe.cells():
        correct = {a.name: good for a in arms} | {"teacher": weak}
        if n == 8:
            correct |= {"sft": weak, "rft": weak, "rft_own": weak}
        _cell(cell_folder(tmp_path / "out", n, start), recipe.start_config(start, n), arms, correct, n)
    # the name curve calls (it imported it): patching scheduler's would guard nothing
    monkeypatch.setattr(curve, "run_plan", lambda *a, **k: pytest.fail("a finished cell ran again"))
    from typer.testing import CliRunner

    from omnidecision.cli import app

    results = tmp_path / "teacher-curve.json"
    res = CliRunner().invoke(app, ["experiment", "--config", str(path), "--out", str(tmp_path / "out"),
                                   "--results", str(results)])
    assert res.exit_code == 0, "".join(__import__("traceback").format_exception(res.exception))[-3000:]
    result = json.loads(results.read_text())
    assert result["kind"] == "teacher-curve" and result["teacher_tasks"] == [8, 16]
    # every teacher run of a cell has 3 tool calls; dev is counted apart
    cost = result["teacher_cost"]
    assert cost["8"]["train"]["runs"] == 8 and cost["16"]["train"]["tool_calls"] == 48
    assert result["teacher_cost"]["16"]["train"]["usd"] == pytest.approx(48 * 0.109)
    assert result["teacher_cost"]["8"]["dev"]["runs"] == 3
    # the planned contrasts at each N: grpo_own − sft is 5/6 − 3/6 at N=8 (weak SFT), 0 at N=16
    assert result["by_n"]["8"]["contrasts"]["planned"]["grpo_own-sft"]["estimate"] == pytest.approx(1 / 3)
    assert result["by_n"]["16"]["contrasts"]["planned"]["grpo_own-sft"]["estimate"] == pytest.approx(0.0)
    assert result["headline"]["smallest_n"] == 8  # RL at N=8 solves what SFT at N=16 solves, task for task
    # what each arm cost: 150 s per replicate, 200 s for rft (its selection too); per point of gain over sft
    cost8 = result["by_n"]["8"]["arm_cost"]
    assert cost8["arms"]["grpo_own"]["step_s"] == 150.0 and cost8["arms"]["rft"]["step_s"] == 200.0
    assert cost8["arms"]["grpo_own"]["step_s_per_point"] == pytest.approx(150 / (100 / 3), abs=0.1)
    assert cost8["arms"]["rft"]["step_s_per_point"] is None  # rft is as weak as sft at N=8: no gain to price
    shared = {k: v for k, v in cost8["shared_steps_s"].items() if v}  # the planted cell's other steps took 0 s
    assert shared == {"judge-train": 30.0} and "sft" not in cost8["arms"]
    assert cost8["arms"]["grpo_own"]["kept_start"] == "2/4" and cost8["arms"]["rft"]["kept_start"] is None

    page = curve_page(result, "docs/results/teacher-curve.json")
    accuracy = page.split("## Accuracy per arm")[1].split("##")[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in accuracy.splitlines() if line.startswith("| ") and "---" not in line}
    for col, n in enumerate(("8", "16")):  # each table cell of the page is the file's figure
        for arm, m in result["by_n"][n]["contrasts"]["means"].items():
            assert rows[arm][col] == f"{m['estimate']:.3f} [{m['low']:.3f}, {m['high']:.3f}]"
        for k, v in result["by_n"][n]["contrasts"]["planned"].items():
            assert f"| {n} | {k} | {v['estimate']:+.3f} | [{v['low']:+.3f}, {v['high']:+.3f}] |" in page
        c = result["teacher_cost"][n]["train"]
        cost = " | ".join(count(c[k]) for k in ("runs", "tool_calls", "tokens"))
        assert f"| {n} | {cost} | {c['usd']:.2f} |" in page
        for seed, wall in zip(result["by_n"][n]["seeds"], result["by_n"][n]["wall_s"], strict=True):
            assert f"| {n} | {seed} | {wall:g} |" in page
        for arm, per in result["by_n"][n]["per_seed_accuracy"].items():  # the spread behind each interval
            assert f"| {n} | {arm} | " + " | ".join(f"{v:.3f}" for v in per) + " |" in page
        for arm, a in result["by_n"][n]["arm_cost"]["arms"].items():
            assert f"| {n} | {arm} | {a['step_s']:g} |" in page
    assert "Smallest N that matches: 8" in page
    goal = result["headline"]["by_n"]["8"]["versus_sft_at"]["16"]
    assert f"| 8 | {result['headline']['by_n']['8']['best']} | 16 | {goal['estimate']:+.3f} |" in page
    assert result["secondary"]["n"] == 8 and "Secondary reading at N = 8" in page
    # the curve plot heads each cell's viewer index; its run pages stay; a cell without a viewer gets none
    assert (tmp_path / "out" / "curve.png").stat().st_size > 1000
    for start in (0, 1):
        view = cell_folder(tmp_path / "out", 16, start) / "view"
        index = (view / "index.html").read_text("utf-8")
        assert "assets/figures/curve.png" in index and (view / "assets" / "figures" / "curve.png").is_file()
        assert f"cell N=16, start {start}" in index and any((view / "run").rglob("*.html"))
    assert not (cell_folder(tmp_path / "out", 8, 0) / "view").exists()


def test_the_headline_needs_the_rl_arm_within_the_margin_of_sft_at_the_largest_n():
    tasks = [f"t{i}" for i in range(40)]

    def arm(k: int) -> dict:  # solves the first k tasks, at two starts, one replicate
        return {s: {"r0": {t: float(i < k) for i, t in enumerate(tasks)}} for s in ("0", "1")}

    by_n = {15: {"pooled_accuracy": {"grpo_own": 0.6, "grpo_judge": 0.5}}, 60: {"pooled_accuracy": {"grpo_own": 0.9}}}
    outcomes = {15: {"grpo_own": arm(24), "grpo_judge": arm(20), "sft": arm(10)},
                60: {"grpo_own": arm(36), "sft": arm(36)}}
    h = headline(by_n, outcomes, ["grpo_judge", "grpo_own"], 0.05)
    assert h["by_n"]["15"]["best"] == "grpo_own" and not h["by_n"]["15"]["matches"]  # 0.6 vs 0.9: far below
    assert h["by_n"]["60"]["matches"] and h["smallest_n"] == 60 and h["teacher_runs_saved_fraction"] == 0.0
    # the issue's goal beside it: grpo_own at N=15 (24 of 40) against sft at N=60 (36 of 40): far below
    far = h["by_n"]["15"]["versus_sft_at"]["60"]
    assert far["estimate"] == pytest.approx(-0.3) and not far["matches"]
    assert h["by_n"]["15"]["largest_sft_matched"] is None
    assert h["by_n"]["60"]["versus_sft_at"] == {}


def _means_of(**arms: tuple[float, float, float]) -> dict:
    return {a: {"estimate": e, "low": lo, "high": hi} for a, (e, lo, hi) in arms.items()}


def test_the_secondary_reading_is_taken_at_the_smallest_n_with_headroom():
    by_n = {
        15: {"contrasts": {"means": _means_of(sft=(0.90, 0.8, 1.0), rule=(1.0, 1.0, 1.0)), "planned": {}}},
        30: {"contrasts": {"means": _means_of(sft=(0.70, 0.6, 0.8), rule=(1.0, 1.0, 1.0)),
                           "planned": _means_of(**{"grpo_judge-sft": (0.10, 0.02, 0.18),
                                                   "grpo_own-sft": (0.04, -0.02, 0.10),
                                                   "grpo_judge-rft": (0.05, -0.1, 0.2)})}},
        60: {"contrasts": {"means": _means_of(sft=(0.60, 0.5, 0.7), rule=(1.0, 1.0, 1.0)), "planned": {}}},
    }
    s = secondary(by_n)
    assert s["n"] == 30 and s["beat_sft"] == ["grpo_judge"] and s["own_over_judge_gain"] == pytest.approx(0.4)
    by_n[30]["contrasts"]["planned"]["grpo_judge-sft"]["estimate"] = -0.01  # no gain: no fraction, and why
    s = secondary(by_n)
    assert s["own_over_judge_gain"] is None and "not above 0" in s["own_over_judge_reason"]
    assert secondary({15: by_n[15]})["n"] is None


def _sized_result() -> dict:
    """A two-N sized-SFT result by hand: three starts; at N=15 sft is below its teacher at start 1 only."""
    def n_block(teacher, sft, fixed, planned, ended):
        return {"per_seed_accuracy": {"teacher": teacher, "sft": sft, "sft_fixed": fixed}, "ended_at_start": ended,
                "contrasts": {"planned": planned}}
    return {"teacher_tasks": [15, 30], "by_n": {
        "15": n_block([0.6, 0.5, 0.7], [0.65, 0.45, 0.7], [0.5, 0.4, 0.8],
                      {"grpo_own-sft": {"estimate": 0.1, "low": 0.0, "high": 0.2}}, {"grpo_own": 2, "sft": 0}),
        "30": n_block([0.6, 0.5, 0.7], [0.61, 0.52, 0.71], [0.6, 0.5, 0.7],
                      {"grpo_own-sft": {"estimate": 0.01, "low": -0.03, "high": 0.05}}, {"grpo_own": 0, "sft": 0})}}


def test_the_sized_goals_are_computed_from_the_file_and_reported_met_or_not():
    result = _sized_result()
    assert sized(result)
    rows = sized_rows(result)
    # N=15: sft at or above its teacher at starts 0 and 2 (0.70 = 0.70 counts), below at 1; its sd over starts
    sd15 = sd([0.65, 0.45, 0.7])
    assert sd15 == pytest.approx(0.1323, abs=1e-4)
    assert f"| 15 | sft | 2 of 3 | {sd15:.3f} | no (every start); sd ≤ 0.06: no |" in rows
    assert "| 15 | sft_fixed | 1 of 3 | 0.208 | – |" in rows
    assert "| 30 | sft | 3 of 3 | 0.095 | yes (every start) |" in rows  # the sd goal is read at the smallest N only
    # half-widths: the goal is read at the largest N; the replicates ended at the start beside each contrast
    assert "| 15 | grpo_own-sft | 0.100 | – | 2, 0 |" in rows
    assert "| 30 | grpo_own-sft | 0.040 | yes (≤ 0.05) | 0, 0 |" in rows
    # a curve without the fixed-steps arm is not a sized one
    del result["by_n"]["30"]["per_seed_accuracy"]["sft_fixed"]
    assert not sized(result)


def test_a_sized_page_leads_with_its_goals_and_links_its_own_declaration(tmp_path):
    # the committed curve's result, given a fixed-steps SFT arm (sft's accuracies lowered by 0.1): a sized curve
    result = json.loads((ROOT / "docs" / "results" / "teacher-curve.json").read_text("utf-8"))
    for b in result["by_n"].values():
        b["per_seed_accuracy"]["sft_fixed"] = [a - 0.1 for a in b["per_seed_accuracy"]["sft"]]
    results = tmp_path / "sft-sized.json"
    results.write_text(json.dumps(result))
    page_path = tmp_path / "sft-sized-result.md"
    curve.main([str(results), "--page", str(page_path), "--title", "SFT sized to its data"])
    page = page_path.read_text("utf-8")
    assert page.startswith("# SFT sized to its data: the result\n")
    assert "[sft-sized.md](sft-sized.md)" in page and "teacher-curve.md" not in page
    goals, headline = page.index("## The declared goals of sized SFT"), page.index("## The teacher curve's headline")
    assert goals < headline
    for row in curve.sized_rows(result):
        assert row in page
    # the curve's own page keeps its title, declaration and headline (the committed page is checked byte for byte
    # in tests/docs/test_research_figures.py)
    plain = curve.curve_page(json.loads((ROOT / "docs" / "results" / "teacher-curve.json").read_text("utf-8")),
                             "docs/results/teacher-curve.json")
    assert "## The declared goals" not in plain and "## Headline (declared before the run)" in plain
