"""Several samples per task: the report's CI and the paired comparisons take the task as their unit (issue 29,
item 2). Three identical samples of each task are one observation of the task, not three: the interval must be
the one of the per-task unit, and `compare`'s paired statistics must read every sample, not sample 0 only.

    .venv/bin/pytest tests/eval/test_clustered_ci.py -q
"""

from __future__ import annotations

import pytest

from omnidecision.eval.compare import load_report, task_correct, write_compare
from omnidecision.eval.report import build_report, write_report
from omnidecision.protocol.records import JudgeResult, RunRecord
from omnidecision.stats import WILSON_RUNS, paired_in_loop, per_task, task_accuracy_ci, wilson


def _run(task: int, sample: int, correct: bool) -> RunRecord:
    return RunRecord(run_id=f"t{task}-{sample}", task_id=f"t{task}", sample=sample, outcome="accepted", level="1",
                     category="c", judge=JudgeResult(correct=correct, method="lenient_match"))


# 20 tasks, 13 solved: Wilson 13/20 by hand, (2k + z^2 -+ z sqrt(z^2 + 4k(n-k)/n)) / (2(n + z^2)), z^2 = 3.841459:
#   (29.841459 -+ 1.959964 * sqrt(3.841459 + 18.2) = 9.201710) / 47.682918 -> [0.432854, 0.818808]
SOLVED = [t < 13 for t in range(20)]


def test_three_samples_per_task_give_the_per_task_ci():
    one = [_run(t, 0, c) for t, c in enumerate(SOLVED)]
    three = [_run(t, s, c) for t, c in enumerate(SOLVED) for s in range(3)]
    rep1, rep3 = build_report(one), build_report(three)
    assert rep1["ci95"] == pytest.approx([0.432854, 0.818808], abs=2e-6)
    assert rep3["ci95"] == pytest.approx(rep1["ci95"], abs=1e-12)  # the per-task unit, not n = 60
    assert rep3["accuracy"] == rep1["accuracy"] == 0.65
    assert (rep3["n"], rep3["n_tasks"], rep3["samples_per_task"]) == (60, 20, 3)
    # the interval over 60 "independent" runs would be narrower: that is what the clustering prevents
    naive = wilson(39, 60)
    assert naive[1] - naive[0] < rep3["ci95"][1] - rep3["ci95"][0] - 0.05
    assert rep1["ci_method"] == WILSON_RUNS and "clustered by task: 3 samples per task" in rep3["ci_method"]
    assert rep3["by_level"]["1"]["ci95"] == pytest.approx(rep1["ci95"], abs=1e-12)
    # the task-level bootstrap agrees with the per-task unit too
    assert rep3["ci95_task_bootstrap"] == rep1["ci95_task_bootstrap"]
    low, high = rep3["ci95_task_bootstrap"]
    assert low < 0.65 < high


def test_varying_samples_use_the_mean_per_task_accuracy():
    # t0: 3/3, t1: 1/3, t2: 0/3, t3: 2/3 -> per-task means 1, 1/3, 0, 2/3; k = 2 (sum), n = 4 tasks
    pattern = {0: [1, 1, 1], 1: [1, 0, 0], 2: [0, 0, 0], 3: [0, 1, 1]}
    runs = [_run(t, s, bool(c)) for t, cs in pattern.items() for s, c in enumerate(cs)]
    rep = build_report(runs)
    assert rep["ci95"] == pytest.approx(list(wilson(2.0, 4)), abs=1e-12)
    assert rep["accuracy"] == 0.5 and rep["n_tasks"] == 4
    assert per_task((r.task_id, r.judge.correct) for r in runs)["t1"] == pytest.approx(1 / 3)
    ci = task_accuracy_ci([("t", True)])
    assert ci["ci95_task_bootstrap"] is None and ci["ci95"] == list(wilson(1, 1))


def _folder(path, samples: dict[int, list[int]]):
    """An eval folder: trajectories.jsonl of the given per-task sample outcomes, and its report."""
    path.mkdir(parents=True)
    runs = [_run(t, s, bool(c)) for t, cs in samples.items() for s, c in enumerate(cs)]
    (path / "trajectories.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in runs), encoding="utf-8")
    write_report(path, runs, {"name": path.name}, plots=False)
    return path


def test_paired_comparisons_use_the_task_unit(tmp_path):
    # sample 0 is the same in both runs: reading sample 0 only would see no difference. Over all samples b does
    # better on t1 (2/3 vs 0/3) and t2 (3/3 vs 1/3), a on t3 (1/3 vs 0/3): per-task deltas 0, 2/3, 2/3, -1/3
    a = _folder(tmp_path / "a", {0: [1, 1, 1], 1: [0, 0, 0], 2: [1, 0, 0], 3: [0, 1, 0]})
    b = _folder(tmp_path / "b", {0: [1, 1, 1], 1: [0, 1, 1], 2: [1, 1, 1], 3: [0, 0, 0]})
    assert task_correct(a) == pytest.approx({"t0": 1.0, "t1": 0.0, "t2": 1 / 3, "t3": 1 / 3})
    doc = write_compare([load_report(a), load_report(b)], tmp_path / "cmp", plot=False)
    (p,) = doc["paired_in_loop"]
    assert (p["n"], p["a_only"], p["b_only"], p["unit"]) == (4, 1, 2, "task")
    assert p["delta"] == pytest.approx(round((0 + 2 / 3 + 2 / 3 - 1 / 3) / 4, 4))
    assert "sign test over tasks" in p["test"]
    # the report's accuracy difference is the paired delta: both are means of per-task accuracies
    reps = [load_report(x) for x in (a, b)]
    assert reps[1]["accuracy"] - reps[0]["accuracy"] == pytest.approx(p["delta"], abs=1e-4)
    assert "unit: the task" in (tmp_path / "cmp" / "compare.md").read_text()


def test_one_sample_per_task_keeps_mcnemar_and_rejects_bad_values():
    r = paired_in_loop({"t1": True, "t2": False}, {"t1": 1.0, "t2": 1.0})
    assert (r["a_only"], r["b_only"], r["test"]) == (0, 1, "exact McNemar; paired bootstrap CI")
    with pytest.raises(ValueError, match=r"b: a task's accuracy must lie in \[0, 1\]"):
        paired_in_loop({"t1": 1.0}, {"t1": 2.0})
