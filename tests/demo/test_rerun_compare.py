"""`omnidecision.pipeline.rerun`: two runs of one start compared unit by unit (weights, accuracy, tasks)."""

from __future__ import annotations

import copy
import json

import pytest

from omnidecision.pipeline.rerun import compare, main


def result(start: str = "2") -> dict:
    """A result file's per-start parts, as `experiment` writes them (two arms, sft trained once, grpo twice)."""
    tasks = {"t0": 1.0, "t1": 0.0, "t2": 1.0, "t3": 1.0}
    return {"seeds": [int(start)], "provenance": [{"cpu": "AMD EPYC"}],
            "per_replicate_accuracy": {"sft": {start: {"r0": 0.75}},
                                       "grpo": {start: {"r0": 0.75, "r1": 0.5}}},
            "outcomes": {"sft": {start: {"r0": dict(tasks)}},
                         "grpo": {start: {"r0": dict(tasks), "r1": {**tasks, "t0": 0.0}}}}}


def models(root, hashes: dict[str, bytes]):
    for name, blob in hashes.items():
        (root / name).mkdir(parents=True)
        (root / name / "model.safetensors").write_bytes(blob)
    (root / "sft-run").mkdir()  # training folders are not planners
    return root


def test_identical_runs_compare_identical(tmp_path):
    m = {"sft": b"a", "grpo.r0": b"b", "grpo.r1": b"c", "judge": b"j"}
    a, b = models(tmp_path / "a", m), models(tmp_path / "b", m)
    report = compare(result(), copy.deepcopy(result()), "2", models=(a, b))
    assert report["identical"] and report["differ"] == []
    assert set(report["units"]) == {"sft.r0", "grpo.r0", "grpo.r1", "judge"}
    assert report["units"]["sft.r0"]["weights_equal"] and report["max_abs_accuracy_difference"] == 0.0


def test_a_moved_task_and_a_changed_weight_are_named(tmp_path):
    a = models(tmp_path / "a", {"sft": b"a", "grpo.r0": b"b", "grpo.r1": b"c", "judge": b"j"})
    b = models(tmp_path / "b", {"sft": b"a", "grpo.r0": b"b", "grpo.r1": b"c", "judge": b"J"})
    moved = result()
    moved["per_replicate_accuracy"]["grpo"]["2"]["r1"] = 0.75
    moved["outcomes"]["grpo"]["2"]["r1"]["t0"] = 1.0
    report = compare(result(), moved, "2", models=(a, b))
    assert not report["identical"]
    assert report["differ"] == ["grpo.r1", "judge"]
    assert report["units"]["grpo.r1"]["tasks_differ"] == 1
    assert report["max_abs_accuracy_difference"] == 0.25


def test_the_cli_reads_one_start_of_a_pooled_file_and_refuses_a_missing_start(tmp_path):
    pooled = result("2")
    for arm, by in result("0")["per_replicate_accuracy"].items():
        pooled["per_replicate_accuracy"][arm]["0"] = by["0"]
    pa, pb, out = tmp_path / "pooled.json", tmp_path / "one.json", tmp_path / "report.json"
    pa.write_text(json.dumps(pooled))
    pb.write_text(json.dumps(result("2")))
    assert main([str(pa), str(pb), "--start", "2", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["identical"] is True
    with pytest.raises(SystemExit, match="start 5 is not in per_replicate_accuracy"):
        main([str(pa), str(pb), "--start", "5"])
