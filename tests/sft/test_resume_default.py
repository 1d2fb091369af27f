"""`omnidecision sft` resumes by default (docs/cluster-workflow.md: "restart the same command after a kill, nothing
finished is lost"): the tiny recipe SIGKILLed after its first checkpoint, then the very same command again, continues
from the newest complete checkpoint (a torn one is skipped) and leaves the earlier checkpoints as they were;
`--resume_from_checkpoint false` starts from scratch (checked by the dry run).

    .venv/bin/pytest tests/sft/test_resume_default.py
"""

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

ROOT = Path(__file__).resolve().parents[2]
MAX_STEPS = 300


def _command(model: Path, data: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "omnidecision.cli", "sft", "--config", str(ROOT / "configs/sft/tiny-cpu.yaml"),
            "--model_name_or_path", str(model), "--dataset_name", str(data), "--output_dir", str(out),
            "--max_steps", str(MAX_STEPS), "--save_steps", "20", "--save_total_limit", "100", "--eval_strategy", "no",
            "--load_best_model_at_end", "false", "--per_device_train_batch_size", "4", "--max_length", "768",
            "--logging_steps", "1", "--disable_tqdm", "true"]


def _states(out: Path) -> dict[str, float]:
    """checkpoint name -> mtime of its trainer_state.json (complete checkpoints only)."""
    return {p.parent.name: p.stat().st_mtime_ns for p in out.glob("checkpoint-*/trainer_state.json")}


@pytest.mark.slow  # ≈ 4 min on 2 busy cores (two trainer start-ups, 300 steps)
@pytest.mark.timeout(480)
def test_the_same_command_resumes_after_a_kill(tiny_model, sft_data, tmp_path):
    out = tmp_path / "sft"
    cmd = _command(tiny_model, sft_data, out)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not list(out.glob("checkpoint-*/trainer_state.json")):  # the first complete checkpoint
            assert proc.poll() is None, "the first run ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint within 300 s"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (out / "sft_run.json").exists(), "the first run finished before the kill: raise MAX_STEPS"
    before = _states(out)
    newest = last_complete_checkpoint(str(out))
    assert newest is not None
    (out / "checkpoint-99999").mkdir()  # a checkpoint torn by the kill: newest by number, never resumed from

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=420)
    assert again.returncode == 0, again.stderr[-3000:]
    run = json.loads((out / "sft_run.json").read_text())
    step = int(newest.rsplit("-", 1)[1])
    assert run["resumed_from"] == newest and step > 0, run["resumed_from"]
    assert again.stderr.count(f"resuming from {newest}") == 1  # said once: the check before the run keeps quiet
    assert "skipping" in again.stderr and "checkpoint-99999" in again.stderr  # the torn one, named
    assert run["global_step"] == MAX_STEPS
    after = _states(out)
    assert {k: after.get(k) for k in before} == before  # every checkpoint of the killed run is kept, untouched
    assert min(int(k.rsplit("-", 1)[1]) for k in set(after) - set(before)) > step  # new ones only after it
    logged = [e["step"] for e in json.loads((out / "log_history.json").read_text()) if "loss" in e]
    assert logged == sorted(set(logged)) and logged[-1] == MAX_STEPS  # one history, no second run from step 0


def test_dry_run_names_where_training_starts(tiny_model, sft_data, tmp_path):
    from omnidecision.sft.dryrun import dry_run

    out = tmp_path / "sft"
    args = _command(tiny_model, sft_data, out)[4:]  # after `-m omnidecision.cli sft`

    def resume_check(*extra: str) -> dict:
        report = dry_run([*args, *extra])
        return next(c for c in report.model_dump()["checks"] if c["what"] == "resume_from_checkpoint")

    assert resume_check()["detail"] == "auto: starts from scratch"
    (out / "checkpoint-20").mkdir(parents=True)
    (out / "checkpoint-20" / "trainer_state.json").write_text("{}")
    assert resume_check()["detail"] == f"auto: resumes from {out / 'checkpoint-20'}"
    assert resume_check("--resume_from_checkpoint", "false")["detail"].endswith("starts from scratch")
    bad = resume_check("--resume_from_checkpoint", str(tmp_path / "nope"))
    assert bad["status"] == "error" and "nope" in bad["detail"]
