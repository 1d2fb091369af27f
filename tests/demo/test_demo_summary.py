"""The demo's summary.json and results table from finished evaluations (fast; the whole demo runs in
tests/demo/test_demo_quick.py, slow), and its protocol: only the final evaluations read the test suite."""

from __future__ import annotations

import json

from omnidecision.demo import PLANNERS, TRAINED, DemoConfig, Runner, build_plan, summarise, table
from omnidecision.protocol.records import JudgeResult, RunRecord
from omnidecision.rl.evaluate import spread


def _eval(folder, correct: list[bool]) -> dict:
    folder.mkdir(parents=True)
    with (folder / "trajectories.jsonl").open("w") as f:
        for i, ok in enumerate(correct):
            rec = RunRecord(run_id=f"r{i}", task_id=f"t{i}", outcome="accepted" if ok else "stuck",
                            judge=JudgeResult(correct=ok))
            f.write(rec.model_dump_json() + "\n")
    k, n = sum(correct), len(correct)
    return {"accuracy": k / n, "ci95": [max(0.0, k / n - 0.2), min(1.0, k / n + 0.2)], "n": n,
            "outcomes": {"accepted": k, "stuck": n - k}, "invalid_action_rate": (n - k) / n,
            "by_category": {"source_switch": {"n": n, "correct": k, "accuracy": k / n, "ci95": [0.0, 1.0]}}}


def test_summary_has_suites_best_paired_and_every_planner_field(tmp_path):
    test_correct = {"sft": [True, False, False, True], "sft_plus": [True, True, False, True],
                    "rounds": [True, True, True, True], "grpo": [True, True, True, False],
                    "teacher": [True, True, True, True]}
    dev_acc = {"sft": 0.5, "sft_plus": 0.6, "rounds": 0.9, "grpo": 0.8, "teacher": 1.0}
    reports = {}
    for name in PLANNERS:
        reports[(name, "test")] = _eval(tmp_path / "eval" / name / "test", test_correct[name])
        reports[(name, "dev")] = {**reports[(name, "test")], "accuracy": dev_acc[name]}
    state = {"suites": {"train": {"seed": 0, "n": 4}, "dev": {"seed": 1000, "n": 4}, "test": {"seed": 2000, "n": 4}},
             "reports": reports, "best": "rounds", "post_sft_wall_s": 30.0,
             "closure": {n: {"closure": spread([0.5, 1.0])} for n in TRAINED}}
    summary = summarise(tmp_path, DemoConfig.quick(), state, {"sft": 12.0, "rounds": 20.0, "grpo": 10.0})

    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved == summary
    assert saved["suites"]["test"] == {"seed": 2000, "n": 4} and saved["best"] == "rounds"
    for name in PLANNERS:
        assert set(saved["planners"][name]) >= {"accuracy", "ci95", "n", "outcomes", "invalid_action_rate",
                                                "heldout_closure_reward", "dev_accuracy"}
    assert saved["planners"]["teacher"]["heldout_closure_reward"] is None
    pairs = {(p["a"], p["b"]): p for p in saved["paired_in_loop"]}
    assert set(pairs) >= {("sft", "sft_plus"), ("sft_plus", "rounds"), ("sft_plus", "grpo")}
    p = pairs[("sft_plus", "rounds")]
    assert (p["n"], p["a_only"], p["b_only"], p["delta"]) == (4, 0, 1, 0.25)
    assert pairs[("sft_plus", "grpo")]["a_only"] == 1 and pairs[("sft_plus", "grpo")]["b_only"] == 1
    assert saved["targets"]["best_over_teacher"] == 1.0 and saved["targets"]["sft_over_teacher"] == 0.5
    text = table(summary)
    assert "| rounds (best) | 1.000 |" in text and "| sft_plus | rounds | 4 | 0 | 1 | +0.250 |" in text
    assert saved["planners"]["sft"]["by_family"] == {"source_switch": {"n": 4, "accuracy": 0.5}}
    assert "| source_switch | 4 | 0.50 | 0.75 | 1.00 | 0.75 | 1.00 |" in text


def test_only_the_final_evaluations_read_the_test_suite(tmp_path):
    plan, _ = build_plan(DemoConfig(), tmp_path, Runner(tmp_path))
    test_suite, evals = str(tmp_path / "tasks-test"), str(tmp_path / "eval")
    names = [s.name for s in plan]
    readers = [s.name for s in plan if any(r.startswith(test_suite) for r in s.reads)]
    assert readers and all(n.startswith("eval-") for n in readers)
    # no training or choice stage reads the test suite or any evaluation on it
    for s in plan:
        if s.name.startswith("eval-") or s.name in ("compare", "view"):  # reports of the final evaluations
            continue
        assert not any(r.startswith(test_suite) or (r.startswith(evals) and r.endswith("/test")) for r in s.reads), s
    best = next(s for s in plan if s.name == "choose-best")
    assert best.reads and all(r.endswith("/dev") for r in best.reads)
    # every model is trained before any evaluation runs
    first_eval = min(i for i, n in enumerate(names) if n.startswith("eval-"))
    assert all(names.index(n) < first_eval for n in ("sft", "rounds", "grpo", "sft-plus"))
    assert all(names.index(n) > first_eval for n in ("compare", "view"))
    # the recipes each training stage runs do not mention the test suite either
    for s in plan:
        if s.cmd and not s.name.startswith(("synth-", "eval-", "compare")):
            assert not any(test_suite in a for a in s.cmd), s.name
