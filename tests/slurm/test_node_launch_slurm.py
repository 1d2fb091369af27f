"""A requeued job on a CPU node: the trainer, started as the SLURM scripts start it (omnidecision.node_launch), gets
the job's SIGTERM alone and finishes a save longer than the 5 s `accelerate launch` leaves its child.

The trainer is a stand-in whose step in flight and checkpoint take 8 s after the signal (a real GRPO step on a busy
CPU node, or any GPU step, can take that long); the local cluster's KillWait is 20 s. The same job under `accelerate
launch` is run beside it and what it did is recorded (docs/cluster/local-cluster.md's figures), not asserted: it is
accelerate's behaviour, the reason for the node launcher.

    make slurm-test     # or: .venv/bin/pytest -q -m slurm tests/slurm/test_node_launch_slurm.py
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.slurm.conftest import ROOT, VENV_BIN, Cluster

pytestmark = pytest.mark.slurm

SAVE_S = 8
TRAINER = f"""import os, signal, sys, time
if int(os.environ.get("SLURM_RESTART_COUNT", "0")) > 0:
    print("trainer: restarted", flush=True)  # the requeued run: nothing left to do in this stand-in
    sys.exit(0)
asked = []
signal.signal(signal.SIGTERM, lambda *_: asked.append(1))
print("trainer: started", flush=True)
while not asked:
    time.sleep(0.05)
time.sleep({SAVE_S})
print("trainer: saved", flush=True)
sys.exit(143)
"""
LAUNCHERS = {"node_launch": f"{VENV_BIN / 'python'} -m omnidecision.node_launch",
             "accelerate_launch": f"{VENV_BIN / 'accelerate'} launch"}


def _requeued_once(cluster: Cluster, tmp_path: Path, launcher: str) -> str:
    """Run the stand-in trainer under `launcher` in a job, requeue it once it runs; the job's log."""
    trainer, log = tmp_path / "trainer.py", tmp_path / f"{launcher}.out"
    trainer.write_text(TRAINER)
    batch = tmp_path / f"{launcher}.sbatch"
    # the scripts' CPU launch in a one-node job (their srun line, less --cpus-per-task/--kill-on-bad-exit/--wait):
    # `bash -c` of the launcher (bash execs a lone command), which execs the trainer
    batch.write_text(f"""#!/bin/bash
srun --nodes=1 --ntasks=1 bash -c "RANK=0 WORLD_SIZE=1 {LAUNCHERS[launcher]} --config_file \
{ROOT / 'configs' / 'accelerate' / 'cpu.yaml'} --cpu --num_machines 1 {trainer}"
""")
    job = cluster.sbatch("--nodes=1", "--requeue", "--gres=none", f"--output={log}", "--open-mode=append",
                         str(batch))
    deadline = time.monotonic() + 300
    while "trainer: started" not in (log.read_text(errors="replace") if log.exists() else ""):
        assert time.monotonic() < deadline and cluster.states(job)[0] in ("PENDING", "RUNNING"), cluster.jobs(job)
        time.sleep(0.2)
    cluster.requeue(job)
    record = cluster.wait(job, timeout=300, until={"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"})[0]
    text = log.read_text(errors="replace")
    assert record["JobState"] == "COMPLETED" and record["Restarts"] == "1", text
    assert "DUE TO JOB REQUEUE" in text and "trainer: restarted" in text, text
    return text


def test_a_requeued_cpu_trainer_finishes_a_save_longer_than_accelerates_5_s(slurm_cluster: Cluster, tmp_path: Path,
                                                                            slurm_results: dict):
    saved = {}
    for launcher in LAUNCHERS:
        folder = tmp_path / launcher
        folder.mkdir()
        saved[launcher] = "trainer: saved" in _requeued_once(slurm_cluster, folder, launcher)
    config = slurm_cluster.run("scontrol", "show", "config").stdout
    slurm_results["cpu_node_sigterm"] = {
        "what": f"a requeue while the trainer's step and checkpoint take {SAVE_S} s after SIGTERM",
        "kill_wait": next((line.split("=", 1)[1].strip() for line in config.splitlines()
                           if line.startswith("KillWait")), "?"),
        "node_launch_saved": saved["node_launch"], "accelerate_launch_saved": saved["accelerate_launch"]}
    assert saved["node_launch"], saved
