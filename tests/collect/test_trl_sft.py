"""The harvested SFT folder trains with TRL's OWN command line, unchanged (`trl sft --dataset_name DIR/sft`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.long  # an end-to-end repeat of a stage the fast suite covers: `make long-test` (CI runs it)
@pytest.mark.requires("trl")
def test_trl_sft_cli_trains_two_steps_on_the_harvest(harvested: Path, tiny_planner: Path, tmp_path: Path) -> None:
    trl = shutil.which("trl") or str(Path(sys.executable).with_name("trl"))
    if not Path(trl).exists():
        pytest.skip("the trl command line is not installed")
    out = tmp_path / "sft"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [trl, "sft", "--model_name_or_path", str(tiny_planner), "--dataset_name", str(harvested / "sft"),
           "--max_steps", "2", "--per_device_train_batch_size", "2", "--assistant_only_loss", "true",
           "--output_dir", str(out), "--bf16", "false", "--use_cpu", "true", "--report_to", "none",
           "--save_strategy", "no", "--logging_steps", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'train_loss'" in proc.stdout + proc.stderr
    assert (out / "config.json").is_file() and any(out.glob("*.safetensors"))
