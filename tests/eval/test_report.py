"""Eval reports on runs of the scripted teacher over synthetic tasks: every key, consistent counts, resume,
compare and the budget-matched ablation."""

from __future__ import annotations

import json

import pytest

from omnidecision.eval.report import REPORT_KEYS, build_report, render_markdown
from omnidecision.eval.runner import load_records, run_eval, trajectories_path
from omnidecision.protocol.records import OUTCOMES, JudgeResult, RunRecord

from .conftest import teacher_recipe


@pytest.fixture(scope="module")
def teacher_eval(synth_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval-teacher")
    rep = run_eval(teacher_recipe(synth_dir, out), progress=False)
    return out, rep


def check_consistent(rep: dict, n: int) -> None:
    for key in REPORT_KEYS:
        assert key in rep, key
    assert rep["n"] == n
    assert sum(rep["outcomes"].values()) == n and set(rep["outcomes"]) == set(OUTCOMES)
    lo, hi = rep["ci95"]
    assert 0.0 <= lo <= rep["accuracy"] <= hi <= 1.0
    assert sum(v["n"] for v in rep["by_level"].values()) == n
    assert sum(v["n"] for v in rep["by_category"].values()) == n
    assert sum(v["correct"] for v in rep["by_category"].values()) == rep["correct"]
    # accuracy within each outcome recombines to the overall accuracy
    within = sum((rep["accuracy_by_outcome"][o] or 0.0) * c for o, c in rep["outcomes"].items())
    assert within == pytest.approx(rep["correct"])
    # every incorrect, judged run is attributed exactly once
    assert sum(rep["attribution"].values()) == n - rep["correct"] - rep["judge_failures"]


def test_report_fields_and_counts(teacher_eval):
    out, rep = teacher_eval
    records = load_records(out)
    assert len(records) == 16 * 2
    check_consistent(rep, 32)
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk["accuracy"] == rep["accuracy"] and on_disk["n"] == 32
    assert rep["mode"] == "ledger" and rep["replay"] is False
    assert rep["planner"]["model"] == "teacher"
    assert 0 < rep["correct"] < 32, "noise 0.35 should make some runs fail and some succeed"
    # closure: correct runs close more blocking needs than incorrect ones on this suite
    ncr = rep["need_closure_rate"]
    assert ncr["correct"] is not None and ncr["incorrect"] is not None and ncr["correct"] >= ncr["incorrect"]
    # tool calls per question add up to the total; prompt tokens per step are positive and ordered
    tools = {k: v for k, v in rep["tool_calls_per_question"].items() if k != "total"}
    assert sum(tools.values()) == pytest.approx(rep["tool_calls_per_question"]["total"])
    pt = rep["prompt_tokens_per_step"]
    assert 0 < pt["min"] <= pt["mean"] <= pt["max"]
    assert rep["tokens_per_question"]["total"] > 0
    assert 0.0 <= rep["invalid_action_rate"] <= 1.0
    for png in ("outcomes.png", "tool_calls.png", "prompt_tokens.png", "attribution.png"):
        assert (out / png).stat().st_size > 1000
    md = (out / "report.md").read_text()
    # two samples per task: the CI takes the task as its unit, and the report says so
    assert "Wilson over tasks at the per-task mean accuracy (clustered by task: 2 samples per task)" in md
    assert rep["n_tasks"] == 16 and rep["samples_per_task"] == 2 and "Failure attribution" in md
    # which judge decided: the recipe's default string scorer, no LLM, and the methods the records carry
    assert rep["judge"] == {"enabled": True, "scorer": "lenient", "llm": None}
    assert "lenient_match" in rep["judge_methods"] and "gaia_scorer" not in rep["judge_methods"]
    assert "string scorer **lenient** (this project's lenient match, not GAIA's rules), no LLM judge" in md


def test_a_recipe_chooses_the_gaia_scorer_and_the_report_says_so(synth_dir, tmp_path):
    rep = run_eval(teacher_recipe(synth_dir, tmp_path, judge={"scorer": "gaia"}, step_budget=15), progress=False)
    assert rep["judge"]["scorer"] == "gaia" and "gaia_scorer" in rep["judge_methods"]
    assert "lenient_match" not in rep["judge_methods"]
    assert {r.judge.method for r in load_records(tmp_path) if r.judge} <= {"gaia_scorer", "no_gold", "mcq",
                                                                           "empty_prediction", "unanswerable"}
    assert "string scorer **gaia** (the official GAIA scoring rules)" in (tmp_path / "report.md").read_text()


def _run(i: int, outcome: str, correct: bool | None, method: str = "lenient_match", level: str = "1") -> RunRecord:
    return RunRecord(run_id=f"r{i}", task_id=f"t{i}", outcome=outcome, level=level, category="c",
                     judge=JudgeResult(correct=correct, method=method))


def test_report_of_hand_labelled_runs():
    """Six runs whose correctness follows from the report's definitions (module docstring), figures by hand:
    correct = judged correct, or a task without gold (`no_gold`) answered by abstaining (`insufficient`); a judge
    failure (correct None) is never correct and is counted apart."""
    runs = [
        _run(1, "accepted", True),  # correct
        _run(2, "accepted", False),  # wrong
        _run(3, "accepted", None),  # judge failure: not correct, not wrong
        _run(4, "insufficient", None, "no_gold", level="2"),  # no answer exists, the agent declined: correct
        _run(5, "accepted", False, "no_gold", level="2"),  # no answer exists, the agent guessed: wrong
        _run(6, "forced", True, level="2"),  # correct
    ]
    rep = build_report(runs, {"name": "hand"})
    assert (rep["n"], rep["correct"], rep["accuracy"], rep["judge_failures"]) == (6, 3, 0.5, 1)
    # Wilson 3/6: (6 + z^2 -+ z * sqrt(z^2 + 4*3*3/6)) / (2 * (6 + z^2)), z^2 = 3.841459 -> [0.187616, 0.812384]
    assert rep["ci95"] == pytest.approx([0.187616, 0.812384], abs=2e-6)
    assert rep["outcomes"] == {"accepted": 4, "insufficient": 1, "forced": 1, "budget": 0, "stuck": 0, "error": 0}
    assert rep["accuracy_by_outcome"] == {"accepted": 0.25, "insufficient": 1.0, "forced": 1.0, "budget": None,
                                          "stuck": None, "error": None}
    assert {k: (v["n"], v["correct"]) for k, v in rep["by_level"].items()} == {"1": (3, 1), "2": (3, 2)}
    assert sum(rep["attribution"].values()) == 2  # the two wrong runs; the judge failure is not attributed


def test_report_counts_match_the_records(teacher_eval):
    out, rep = teacher_eval
    records = load_records(out)
    for o in OUTCOMES:
        assert rep["outcomes"][o] == sum(r.outcome == o for r in records)
    steps = sum(len(r.steps) for r in records)
    assert rep["invalid_action_rate"] == pytest.approx(sum(bool(s.invalid) for r in records for s in r.steps) / steps)


def test_replay_label_and_empty_report(teacher_eval):
    out, _ = teacher_eval
    records = [r.model_copy(update={"replay": True}) for r in load_records(out)]
    rep = build_report(records, {"name": "r"})
    assert rep["replay"] is True and "replay mode" in render_markdown(rep)
    empty = build_report([])
    assert empty["n"] == 0 and empty["accuracy"] is None and empty["ci95"] == [0.0, 1.0]
    render_markdown(empty)


def test_resume_skips_finished_ids(synth_dir, tmp_path, teacher_eval):
    """An eval killed mid-run (some complete lines, one torn line) restarts, skips what finished, and ends with the
    same set of runs as the uninterrupted eval — none lost, none duplicated."""
    full_out, full_rep = teacher_eval
    out = tmp_path / "resumed"
    out.mkdir()
    lines = trajectories_path(full_out).read_text().splitlines(keepends=True)
    kept = lines[:11]
    trajectories_path(out).write_text("".join(kept) + lines[11][:200])  # the kill tore line 12
    finished = {(json.loads(x)["task_id"], json.loads(x)["sample"]) for x in kept}
    finished_run_ids = {json.loads(x)["run_id"]: json.loads(x)["totals"]["wall_s"] for x in kept}

    rep = run_eval(teacher_recipe(synth_dir, out), progress=False)
    assert rep["new_runs"] == 32 - 11 and rep["skipped_runs"] == 11
    records = load_records(out)
    keys = [(r.task_id, r.sample) for r in records]
    assert len(keys) == len(set(keys)) == 32
    assert finished <= set(keys)
    # the finished records were not re-run: their lines are byte-identical at the head of the file
    text = trajectories_path(out).read_text().splitlines(keepends=True)
    assert text[:11] == kept
    assert all(json.loads(x)["totals"]["wall_s"] == finished_run_ids[json.loads(x)["run_id"]] for x in text[:11])
    # the teacher is seeded: the resumed eval reports what the uninterrupted one reported
    assert rep["correct"] == full_rep["correct"] and rep["outcomes"] == full_rep["outcomes"]
    # a second start has nothing left to do
    again = run_eval(teacher_recipe(synth_dir, out), progress=False)
    assert again["new_runs"] == 0 and again["n"] == 32
