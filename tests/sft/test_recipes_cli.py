"""Recipes parse with TrlParser (YAML + CLI overrides, unknown keys rejected); the CLI commands run.

    .venv/bin/pytest tests/sft/test_recipes_cli.py -q
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "configs" / "sft").glob("*.yaml"))


def parse_args(argv: list[str]):
    # omnidecision.sft.config imports trl: imported when a test runs, after tests/sft/conftest.py's requires check
    from omnidecision.sft.config import parse_args as parse

    return parse(argv)


@pytest.fixture
def keep_env():
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def _cpu(recipe: Path) -> list[str]:
    """On a machine without CUDA a bf16 (GPU) recipe is parsed as a CPU run on purpose (otherwise: an error)."""
    import torch

    wants_bf16 = yaml.safe_load(recipe.read_text()).get("bf16")
    return ["--bf16", "false", "--use_cpu", "true"] if wants_bf16 and not torch.cuda.is_available() else []


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_every_recipe_parses(recipe, keep_env):
    script, training, model = parse_args(["--config", str(recipe), *_cpu(recipe)])
    assert training.assistant_only_loss is True
    assert script.dataset_name and model.model_name_or_path and training.output_dir
    assert training.learning_rate > 0
    assert not training.packing  # padded batches by default (packing is ~6x slower on CPU)


def test_recipe_values_and_cli_overrides():
    script, training, model = parse_args(["--config", str(ROOT / "configs/sft/tiny-cpu.yaml"),
                                          "--learning_rate", "1e-3", "--max_steps", "7"])
    assert training.learning_rate == 1e-3 and training.max_steps == 7
    assert training.per_device_train_batch_size == 16  # from the YAML
    assert training.bf16 is False and not model.use_peft
    assert script.dataset_test_split == "validation"


def test_lora_recipe_is_lora(keep_env):
    recipe = ROOT / "configs/sft/qwen3-8b-lora.yaml"
    _, training, model = parse_args(["--config", str(recipe), *_cpu(recipe)])
    assert model.use_peft and model.lora_r == 64 and model.lora_target_modules in ("all-linear", ["all-linear"])
    assert training.learning_rate == 1e-4


def test_unknown_recipe_key_is_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"model_name_or_path": "x", "learning_rat": 0.1}))
    with pytest.raises(ValueError, match="learning_rat"):
        parse_args(["--config", str(bad)])


def test_accelerate_configs_are_complete():
    for name in ("ddp", "zero2", "zero3", "fsdp"):
        cfg = yaml.safe_load((ROOT / "configs/accelerate" / f"{name}.yaml").read_text())
        assert cfg["distributed_type"] in ("MULTI_GPU", "DEEPSPEED", "FSDP") and cfg["num_processes"] >= 1
    assert yaml.safe_load((ROOT / "configs/accelerate/zero3.yaml").read_text())["deepspeed_config"]["zero_stage"] == 3


def test_cli_tiny_planner_sft_and_export(tmp_path, sft_data):
    from typer.testing import CliRunner

    from omnidecision.cli import app

    runner = CliRunner()
    model = tmp_path / "tiny"
    res = runner.invoke(app, ["tiny-planner", "--out", str(model), "--data", str(sft_data), "--hidden", "32",
                              "--layers", "1"])
    assert res.exit_code == 0, res.output
    assert json.loads((model / "config.json").read_text())["hidden_size"] == 32
    out = tmp_path / "sft"
    res = runner.invoke(app, ["sft", "--config", str(ROOT / "configs/sft/tiny-cpu.yaml"),
                              "--model_name_or_path", str(model), "--dataset_name", str(sft_data),
                              "--output_dir", str(out), "--max_steps", "2", "--per_device_train_batch_size", "2",
                              "--eval_strategy", "no", "--save_strategy", "no", "--disable_tqdm", "true"])
    assert res.exit_code == 0, res.output
    assert (out / "log_history.json").exists() and "step 2" in res.output
    res = runner.invoke(app, ["export", str(out), "--out", str(tmp_path / "exp")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "exp" / "PROVENANCE.md").exists()
    res = runner.invoke(app, ["sft", "--config", str(ROOT / "configs/sft/tiny-cpu.yaml"), "--no_such_flag", "1"])
    assert res.exit_code != 0 and "no_such_flag" in res.output
