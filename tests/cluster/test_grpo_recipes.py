"""The GPU GRPO recipes and SLURM scripts agree with the rest of the workflow: the server recipe's LoRA shape is the
SFT adapter's it continues, each tracked recipe names its wandb run and project, the judge cache follows the run's
output_dir, grpo.slurm uses the project's venv as sft.slurm does, and sft.slurm sets no deprecated hub switch.

    .venv/bin/pytest tests/cluster/test_grpo_recipes.py
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "configs/grpo/qwen3-8b-lora-vllm-server.yaml"
GPU_GRPO = [SERVER, ROOT / "configs/grpo/qwen3-8b-vllm-colocate.yaml"]


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text("utf-8"))


def test_server_recipe_lora_matches_the_sft_adapter():
    sft = _yaml(ROOT / "configs/sft/qwen3-8b-lora.yaml")
    grpo = _yaml(SERVER)
    assert (grpo["lora_r"], grpo["lora_alpha"]) == (sft["lora_r"], sft["lora_alpha"])
    assert grpo["model_name_or_path"] == sft["output_dir"]  # it continues that adapter


@pytest.mark.parametrize("recipe", GPU_GRPO, ids=lambda p: p.stem)
def test_tracked_grpo_recipes_name_their_run(recipe, monkeypatch):
    from omnidecision.rl.config import parse_args

    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    _, training, _ = parse_args(["--config", str(recipe), "--bf16", "false", "--use_cpu", "true"])
    assert "wandb" in training.report_to
    assert training.run_name and training.run_name != training.output_dir
    assert os.environ.get("WANDB_PROJECT") == "omnidecision"  # the recipe's env: block, set by TrlParser


def test_judge_cache_follows_output_dir(tmp_path):
    from omnidecision.rl.config import parse_args

    base = ["--config", str(SERVER), "--bf16", "false", "--use_cpu", "true"]
    script, training, _ = parse_args(base)
    assert script.judge_cache is None
    params = script.reward_params(0, 1, training.output_dir)
    assert params["closure"]["judge"]["cache_path"] == str(Path(training.output_dir) / "judge_cache.jsonl")
    script, _, _ = parse_args([*base, "--judge_cache", str(tmp_path / "j.jsonl")])
    assert script.judge_options(output_dir="elsewhere")["cache_path"] == str(tmp_path / "j.jsonl")
    script, _, _ = parse_args([*base, "--judge_cache", "none"])
    assert script.judge_options(output_dir="elsewhere")["cache_path"] is None


def test_grpo_slurm_uses_the_project_venv(tmp_path):
    """A `.venv` in the submit folder comes first on PATH: its omnidecision runs the pre-flight (here a stand-in
    that records the call and fails it, so nothing else starts)."""
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "activate").write_text(f'export PATH="{venv}:$PATH"\n')
    (venv / "omnidecision").write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/called"\nexit 2\n')
    (venv / "omnidecision").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.pop("OD", None)
    res = subprocess.run(["bash", str(ROOT / "scripts/slurm/grpo.slurm"), str(SERVER), "--dry-run"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and (tmp_path / "called").exists(), res.stderr
    assert "grpo" in (tmp_path / "called").read_text()


def test_sft_slurm_sets_no_deprecated_hub_switch():
    assert "HF_HUB_ENABLE_HF_TRANSFER" not in (ROOT / "scripts/slurm/sft.slurm").read_text()
