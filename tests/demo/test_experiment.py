"""The experiment's recipe (configs/experiment/*.yaml), budgets matched on consumed rows, and the planned contrasts
over start → replicate → task (fast: no training; the trainer_state.json files are the Trainer's format)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from omnidecision.pipeline.arms import ARMS
from omnidecision.pipeline.budget import consumed, matched_steps
from omnidecision.pipeline.contrasts import contrast_section
from omnidecision.pipeline.experiment import ExperimentRecipe, exploratory, load_experiment
from omnidecision.pipeline.plan import CONFIGS, DemoConfig, build_plan, output_dir
from omnidecision.pipeline.summary import budgets

DEFAULT = CONFIGS / "experiment" / "default.yaml"


def test_the_shipped_recipe_declares_starts_replicates_and_planned_contrasts():
    recipe = load_experiment(DEFAULT)
    assert len(recipe.starts) >= 2 and recipe.replicates >= 2
    assert ("sft", "grpo_judge") in recipe.contrasts() and ("rft", "grpo_judge") in recipe.contrasts()
    assert not set(recipe.contrasts()) & set(exploratory(recipe.contrasts()))
    cfg = recipe.start_config(recipe.starts[1])
    assert cfg.seed == recipe.starts[1] and cfg.replicates == recipe.replicates
    # the own-states arm against the teacher-states arm, its start and its control (issue 37)
    assert {("grpo_judge", "grpo_own"), ("sft", "grpo_own"), ("rft_own", "grpo_own")} <= set(recipe.contrasts())
    # every start plans every post-SFT arm `replicates` times, but those listed single (outside the planned
    # contrasts: sft_plus) once
    assert recipe.single == ["sft_plus"] and cfg.single == ("sft_plus",)
    planned = {n for pair in recipe.contrasts() for n in pair}
    plan = build_plan(cfg, Path("/x"))
    for arm in ARMS:
        if arm.replicated:
            want = 1 if arm.name in recipe.single else recipe.replicates
            assert sum(1 for s in plan if s.name.startswith("eval-") and s.arm == arm.name) == want, arm.name
            if arm.name in planned:  # ≥ 12 replicates for every post-SFT arm in a planned contrast (issue 36)
                assert want * len(recipe.starts) >= 12, arm.name


def test_the_serving_parity_check_and_the_view_run_at_the_first_start_only():
    recipe = load_experiment(DEFAULT)
    assert recipe.checks == "first"
    first, later = (build_plan(recipe.start_config(s), Path("/x")) for s in recipe.starts[:2])
    for name in ("eval-sft.vllm", "view"):
        assert any(s.name == name for s in first) and not any(s.name == name for s in later), name
    # the arms themselves are the same at every start: only the checks differ
    assert {s.name for s in first} - {s.name for s in later} == {"eval-sft.vllm", "view"}
    every = recipe.model_copy(update={"checks": "every"})
    assert any(s.name == "view" for s in build_plan(every.start_config(recipe.starts[1]), Path("/x")))


@pytest.mark.parametrize(("text", "needle"), [
    ("starts: [0, 0]\nreplicates: 2\ntest_tasks: 10\nplanned: [grpo_judge-sft]\n", "starts must be distinct"),
    ("starts: [0]\nreplicates: 0\ntest_tasks: 10\nplanned: [grpo_judge-sft]\n", "replicates"),
    ("starts: [0]\nreplicates: 2\ntest_tasks: 10\nplanned: [grpo_judge-nope]\n", "['nope'] not in the arm table"),
    ("starts: [0]\nreplicates: 2\ntest_tasks: 10\nplanned: [grpo_judge]\n", "write it as `b-a`"),
    ("starts: [0]\nreplicates: 2\ntest_tasks: 10\nplanned: [grpo-sft]\nseeds: 3\n", "seeds"),
    ("starts: [0\n", "not valid YAML"),
    ("starts: [0]\nreplicates: 2\ntest_tasks: 10\nplanned: [grpo-sft]\nsingle: [sft]\n",
     "'sft' is not a replicated post-SFT arm"),
    ("starts: [0]\nreplicates: 2\ntest_tasks: 10\nplanned: [grpo-sft]\nsingle: [grpo]\n",
     "appear in a planned contrast"),
])
def test_a_bad_recipe_is_a_clear_error_naming_the_file_and_field(tmp_path, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as err:
        load_experiment(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_the_experiment_cli_names_a_bad_recipe(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("starts: [0]\nreplicates: 2\ntest_tasks: 10\nplanned: [x-sft]\n")
    proc = subprocess.run([sys.executable, "-m", "omnidecision.cli", "experiment", "--config", str(path),
                           "--dry-run"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "bad.yaml" in proc.stderr and "not in the arm table" in proc.stderr


def _state(folder: Path, steps: int, batch: int, tokens: int | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    log = [{"step": steps, "num_tokens": tokens}] if tokens else []
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": steps, "train_batch_size": batch,
                                                           "log_history": log}))


def test_a_control_trains_for_the_rows_its_reference_consumed(tmp_path):
    cfg = DemoConfig.quick()
    plan = build_plan(cfg, tmp_path)
    by = {s.name: s for s in plan}
    _state(output_dir(by["judge-train"]), steps=5, batch=16)  # 80 pairs
    _state(output_dir(by["grpo_judge.r0"]), steps=3, batch=32, tokens=2000)  # 96 completions
    recipe = CONFIGS / "sft" / "tiny-cpu-continue.yaml"
    refs = [output_dir(by[r]) for r in by["sft_plus.r0"].budget_of]
    assert matched_steps(refs, recipe) == 11  # ceil(176 / 16): never less than the reference
    assert consumed(output_dir(by["grpo_judge.r0"])).tokens == 2000
    # what the controls then consumed: one matches, one fell short (it was stopped early)
    _state(output_dir(by["sft_plus.r0"]), steps=11, batch=16)
    _state(output_dir(by["rft.r0"]), steps=9, batch=16)
    got = budgets(plan)
    assert got["sft_plus.r0"]["rows"] == 176 and got["sft_plus.r0"]["reference_rows"] == 176
    assert got["sft_plus.r0"]["matched"] and got["sft_plus.r0"]["tolerance_rows"] == 16
    assert not got["rft.r0"]["matched"]
    assert got["grpo_judge.r0"] == {"steps": 3, "batch": 32, "grad_accum": 1, "rows": 96, "tokens": 2000}


def test_a_missing_trainer_state_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="trainer_state.json"):
        consumed(tmp_path)
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": "x", "train_batch_size": 4}))
    with pytest.raises(ValueError, match="global_step"):
        consumed(tmp_path)


def _nested(acc: dict[str, list[list[int]]]) -> dict[str, dict[str, dict[str, float]]]:
    """{start: [[task outcomes of replicate 0], [replicate 1] ...]} -> the nested shape."""
    return {s: {f"r{k}": {f"t{i}": float(v) for i, v in enumerate(rep)} for k, rep in enumerate(reps)}
            for s, reps in acc.items()}


def test_planned_contrasts_have_intervals_per_replicate_deltas_and_the_rest_holm():
    sft = _nested({"0": [[1, 0, 1, 0, 1, 0, 1, 0]], "1": [[0, 0, 1, 1, 0, 0, 1, 1]]})
    better = _nested({"0": [[1, 1, 1, 0, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0, 1, 0]],
                      "1": [[1, 0, 1, 1, 1, 0, 1, 1], [0, 1, 1, 1, 1, 0, 1, 1]]})
    same = _nested({"0": [[1, 0, 1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0, 1, 0]],
                    "1": [[0, 0, 1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 0, 0, 1, 1]]})
    out = contrast_section({"sft": sft, "grpo_judge": better, "grpo": same},
                           [("sft", "grpo_judge")], [("sft", "grpo"), ("grpo", "grpo_judge")], n_boot=500)
    c = out["planned"]["grpo_judge-sft"]
    assert c["estimate"] == pytest.approx(0.25)  # start 0: +0.25 (both replicates' mean), start 1: +0.25
    assert c["low"] <= c["estimate"] <= c["high"] and c["half_width"] > 0
    assert sorted((r["start"], r["replicate"]) for r in c["per_replicate"]) == [
        ("0", "r0"), ("0", "r1"), ("1", "r0"), ("1", "r1")]
    assert out["exploratory"]["grpo-sft"]["estimate"] == 0.0
    assert out["means"]["sft"]["estimate"] == pytest.approx(0.5) and out["means"]["grpo_judge"]["low"] < 0.75
    assert set(out["exploratory"]) == {"grpo-sft", "grpo_judge-grpo"}
    assert all(v["p_holm"] >= v["p_value"] for v in out["exploratory"].values())
    with pytest.raises(ValueError, match="without outcomes"):
        contrast_section({"sft": sft}, [("sft", "grpo_judge")])


def test_the_contrast_interval_widens_with_replicate_spread():
    """The summary's contrasts count replicate noise: the same mean, replicates apart, gives a wider interval."""
    tasks = [1, 0] * 20
    a = _nested({"0": [tasks], "1": [tasks]})
    steady = _nested({"0": [[1] * 30 + [0] * 10] * 2, "1": [[1] * 30 + [0] * 10] * 2})
    spread = _nested({"0": [[1] * 40, [1] * 20 + [0] * 20], "1": [[1] * 40, [1] * 20 + [0] * 20]})
    widths = [contrast_section({"sft": a, "grpo": b}, [("sft", "grpo")])["planned"]["grpo-sft"]["half_width"]
              for b in (steady, spread)]
    assert widths[1] > widths[0]


def test_recipe_model_rejects_unknown_keys():
    with pytest.raises(ValueError):
        ExperimentRecipe.model_validate({"starts": [0], "replicates": 1, "test_tasks": 5, "planned": ["grpo-sft"],
                                         "extra": 1})


def test_the_committed_result_names_no_machine_path(tmp_path):
    from omnidecision.pipeline.experiment import REPO, write_result

    argv = ["sft", "--output_dir", f"{REPO}/runs/experiment/seed-0/m"]
    pooled = {"provenance": [{"steps": {"sft": {"argv": argv}}}]}
    write_result(pooled, tmp_path, tmp_path / "results" / "experiment.json")
    committed = (tmp_path / "results" / "experiment.json").read_text()
    assert str(REPO) not in committed and '"runs/experiment/seed-0/m"' in committed
    assert str(REPO) in (tmp_path / "experiment.json").read_text()  # the run folder's own copy is left as it ran
