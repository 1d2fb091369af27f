"""GRPO kill and resume: a run SIGKILLed after its first checkpoint, restarted with `--resume_from_checkpoint
true`, continues from that checkpoint (not from step 0) and ends at the same global step as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omnidecision.checkpoints import last_complete_checkpoint

pytestmark = pytest.mark.requires("trl")  # skips without it; fails under CI=true (tests/conftest.py)

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "grpo" / "tiny-cpu.yaml"


def _cmd(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-c", "from omnidecision.cli import app; app()", "grpo", "--config", str(RECIPE),
            "--model_name_or_path", str(model), "--dataset_name", str(data), "--output_dir", str(out),
            "--max_steps", "6", "--num_generations", "4", "--per_device_train_batch_size", "4",
            "--generation_batch_size", "8", "--max_completion_length", "16", "--eval_closure_n", "0",
            "--logging_steps", "1", "--save_strategy", "steps", "--save_steps", "2", "--save_total_limit", "5",
            *extra]


# No wall-clock deadline of its own (a loaded machine is slow, not wrong): pytest-timeout bounds the whole test.
@pytest.mark.long  # an end-to-end repeat of a stage the fast suite covers: `make long-test` (CI runs it)
@pytest.mark.timeout(600)
def test_grpo_resumes_from_its_last_checkpoint_after_sigkill(tiny_planner, rl_dir, tmp_path):
    out = tmp_path / "grpo"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(_cmd(tiny_planner, rl_dir, out), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while not (out / "checkpoint-2" / "trainer_state.json").exists():
            assert proc.poll() is None, "the first run ended before writing checkpoint-2"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # also when the test fails or times out: no training left behind
    proc.wait()
    assert not (out / "checkpoint-6").exists()  # killed part-way
    # Mark the history saved in the newest complete checkpoint (the kill may have torn a later one mid-save, which
    # the resume must skip): only a run that really resumes from it carries the marker on.
    newest = Path(last_complete_checkpoint(str(out)))
    saved = json.loads((newest / "trainer_state.json").read_text())
    saved["log_history"][0]["resume_marker"] = 1
    (newest / "trainer_state.json").write_text(json.dumps(saved))
    done = subprocess.run(_cmd(tiny_planner, rl_dir, out, "--resume_from_checkpoint", "true"), env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    state = json.loads((out / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["global_step"] == 6
    assert state["log_history"][0].get("resume_marker") == 1  # continued from the checkpoint, not from step 0
    assert [row["step"] for row in state["log_history"] if "loss" in row][-1] == 6
