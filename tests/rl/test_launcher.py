"""One launcher for every trained stage (omnidecision/launch.py): an override on the command line reaches rft-select
exactly as it reaches grpo, `judge train` reads its recipe through TrlParser, the old flag spellings are aliases of
real recipe fields, and the placebo's shuffle follows the run's seed.

    pytest -q tests/rl/test_launcher.py
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.requires("trl")

ROOT = Path(__file__).resolve().parents[2]
GRPO = ROOT / "configs" / "grpo" / "tiny-cpu-judge.yaml"
SHUFFLED = ROOT / "configs" / "grpo" / "tiny-cpu-judge-shuffled.yaml"
JUDGE = ROOT / "configs" / "judge" / "tiny-cpu.yaml"


def _stages() -> dict:
    """Each trained stage as its package declares it (the launcher holds no table of them)."""
    from omnidecision.rl.config import GRPO_STAGE, RFT_STAGE
    from omnidecision.rl.judge_config import JUDGE_STAGE
    from omnidecision.sft.config import SFT_STAGE

    return {"sft": SFT_STAGE, "grpo": GRPO_STAGE, "rft": RFT_STAGE, "judge": JUDGE_STAGE}


def _parse(stage: str, recipe: Path, extra: list[str]):
    from omnidecision.launch import parse_stage_args, stage_args

    spec = _stages()[stage]
    return parse_stage_args(spec, stage_args(spec, recipe, extra))


def test_an_override_reaches_rft_exactly_as_it_reaches_grpo():
    overrides = ["--temperature", "0.3", "--num_generations", "4", "--seed", "7", "--judge_path", "j"]
    g_script, g_training, g_model = _parse("grpo", GRPO, overrides)
    r_script, r_training, r_model = _parse("rft", GRPO, overrides)
    for training in (g_training, r_training):
        assert training.temperature == 0.3 and training.num_generations == 4 and training.seed == 7
    assert r_script.judge_path == g_script.judge_path == "j"
    # not only the two fields: the whole typed configuration is the one GRPO runs with
    assert g_training.to_dict() == r_training.to_dict()
    assert dataclasses.asdict(g_script) == dataclasses.asdict(r_script)
    assert dataclasses.asdict(g_model) == dataclasses.asdict(r_model)
    # the old spellings of rft-select are aliases of the same fields
    _, aliased, model = _parse("rft", GRPO, ["--samples", "4", "--match-steps", "9", "--model", "m"])
    assert aliased.num_generations == 4 and aliased.max_steps == 9 and model.model_name_or_path == "m"


def test_rft_select_rejects_what_grpo_rejects():
    """The same parser: an override GRPO refuses is refused by rft-select with the same message."""
    from omnidecision.cli import app

    bad = ["--config", str(GRPO), "--num_generations", "3"]
    grpo = CliRunner().invoke(app, ["grpo", *bad])
    rft = CliRunner().invoke(app, ["rft-select", *bad, "--out", "unused"])
    assert grpo.exit_code == rft.exit_code == 2
    assert "multiple of" in grpo.output and "multiple of" in rft.output
    unknown = CliRunner().invoke(app, ["rft-select", "--config", str(GRPO), "--out", "x", "--tempreature", "1"])
    assert unknown.exit_code == 2 and "tempreature" in unknown.output


def test_judge_train_reads_its_recipe_through_trlparser(tmp_path):
    from omnidecision.rl.judge_config import JudgeRewardConfig

    script, training, model = _parse("judge", JUDGE, [])
    assert isinstance(training, JudgeRewardConfig)
    assert (script.dataset_name, model.model_name_or_path, training.max_steps) == (
        "runs/demo/data/rl", "runs/demo/models/sft", 300)
    # the demo's spellings (--data --model --out --max-steps --seed) are aliases of the recipe's fields
    script, training, model = _parse("judge", JUDGE, ["--data", "d/rl", "--model", "m", "--out", str(tmp_path),
                                                      "--max-steps", "4", "--seed", "3", "--batch-size", "8",
                                                      "--no-use-cpu"])
    assert (script.dataset_name, model.model_name_or_path, training.output_dir) == ("d/rl", "m", str(tmp_path))
    assert (training.max_steps, training.seed, training.per_device_train_batch_size) == (4, 3, 8)
    assert training.use_cpu is False
    # a recipe key no dataclass knows is an error that names it
    bad = tmp_path / "bad.yaml"
    bad.write_text(JUDGE.read_text() + "max_stpes: 3\n")
    with pytest.raises(ValueError, match="max_stpes"):
        _parse("judge", bad, [])
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        _parse("judge", JUDGE, ["--max_steps", "0"])


def test_judge_train_cli_names_a_bad_override():
    from omnidecision.cli import app

    res = CliRunner().invoke(app, ["judge", "train", "--config", str(JUDGE), "--learnig_rate", "1e-3"])
    assert res.exit_code == 2 and "learnig_rate" in res.output


def test_judge_train_dry_run_prints_the_command_a_run_starts(tmp_path):
    import json
    import sys

    from omnidecision.cli import app
    from omnidecision.launch import render, stage_command

    (tmp_path / "rl").mkdir()
    # a start model that is not there (not the recipe's runs/demo default, which a demo run leaves behind)
    args = ["--config", str(JUDGE), "--dataset_name", str(tmp_path / "rl"), "--output_dir", str(tmp_path / "j"),
            "--model_name_or_path", str(tmp_path / "no-model")]
    res = CliRunner().invoke(app, ["judge", "train", *args, "--dry-run"])
    report = json.loads(res.stdout[res.stdout.index("{"):])
    assert report["resolved"]["training"]["output_dir"] == str(tmp_path / "j")
    assert report["would_run"] == [render(stage_command(_stages()["judge"], args))]
    assert report["would_run"][0].startswith(f"{sys.executable} -m omnidecision.rl.judge_train --config")
    assert res.exit_code == 2  # the start model is not there
    assert any(c["what"] == "model_name_or_path" and c["status"] == "error" for c in report["checks"])


def test_every_alias_names_a_field_of_its_stage():
    """An alias can not rot: its target is a field of the dataclasses the stage's parser fills."""
    for spec in _stages().values():
        parser = spec.parse.__globals__["make_parser"]()
        fields = {f.name for dc in parser.dataclass_types for f in dataclasses.fields(dc)}
        for target in [*spec.aliases.values(), *spec.bool_aliases.values()]:
            assert target.removeprefix("--") in fields, (spec.name, target)


def test_every_stage_module_runs_its_stage():
    """The module a stage's command line names (`python -m`, accelerate) is a real module with the stage's `main`,
    and a `__main__` block where a command is started or printed (the accelerate stages, judge train's dry run;
    rft-select has neither): the launcher never imports it, so this is where a renamed module would show."""
    import importlib
    import inspect

    stages = _stages()
    for spec in stages.values():
        module = importlib.import_module(spec.module)
        assert callable(getattr(module, "main", None)), spec
    for spec in [s for s in stages.values() if s.accelerate] + [stages["judge"]]:
        assert 'if __name__ == "__main__":' in inspect.getsource(importlib.import_module(spec.module)), spec


def test_the_placebo_shuffle_follows_the_run_seed():
    from omnidecision.rewards.closure import shuffled_within_groups

    def permutation(seed: int) -> list[float]:
        script, training, _ = _parse("grpo", SHUFFLED, ["--seed", str(seed)])
        options = script.reward_params(0, 1, None, seed=training.seed)["closure"]["judge"]
        assert options["shuffle"] is True
        # the scores a judge would give: distinct values, 8 groups of 8 (one GRPO batch), the shuffle seeded as run
        func = shuffled_within_groups(lambda completions, **kw: [float(i) for i in range(len(completions))],
                                      options["shuffle_seed"])
        return func([""] * 64, ledger=[g for g in range(8) for _ in range(8)])

    assert permutation(0) == permutation(0)
    assert permutation(0) != permutation(1) != permutation(2)
    assert sorted(permutation(1)) == sorted(permutation(0))  # a permutation, within each group
