"""scripts/slurm/sft.slurm submitted for real to the local two-node cluster, on CPU nodes (GPUS_PER_NODE=0, one
process a node over gloo, configs/accelerate/cpu.yaml): the same loss curve and weights as the same two processes
started without SLURM; a requeue after the first checkpoint resumes to the uninterrupted run's weights, and the steps
a preemption costs with and without the SIGTERM checkpoint (`save_on_sigterm`).

    make slurm-test     # or: .venv/bin/pytest -q -m slurm tests/slurm/test_train_slurm.py
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import TINY_KWARGS
from tests.slurm.conftest import ROOT, VENV_BIN, Cluster, free_port_block

pytestmark = [pytest.mark.slurm, pytest.mark.requires("trl")]

RECIPE = "configs/sft/tiny-cpu.yaml"
ACCEL = "configs/accelerate/cpu.yaml"
SCRIPT = "scripts/slurm/sft.slurm"


@pytest.fixture(scope="module")
def sft_inputs(tmp_path_factory) -> tuple[Path, Path]:
    """(tiny planner, SFT rows): a from-scratch tiny Qwen3 and rule-planner rows of random valid ledger states."""
    from omnidecision.synthetic.tiny import build_tiny_planner

    root = tmp_path_factory.mktemp("sft-inputs")
    data = root / "data"
    subprocess.run([str(VENV_BIN / "python"), "-m", "omnidecision.synthetic.states", str(data), "--train", "400",
                    "--validation", "32"], check=True, capture_output=True, cwd=ROOT)
    return build_tiny_planner(root / "model", **TINY_KWARGS), data


def overrides(model: Path, data: Path, out: Path, steps: int, save: int) -> list[str]:
    return ["--model_name_or_path", str(model), "--dataset_name", str(data), "--output_dir", str(out),
            "--max_steps", str(steps), "--save_steps", str(save), "--eval_steps", str(save), "--logging_steps", "1",
            "--per_device_train_batch_size", "8", "--max_eval_samples", "16", "--save_total_limit", "10"]


def weights(out: Path) -> str:
    return hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def losses(out: Path) -> list[tuple[int, float]]:
    return [(h["step"], h["loss"]) for h in json.loads((out / "log_history.json").read_text()) if "loss" in h]


def local_run(args: list[str], nproc: int, log: Path) -> None:
    """The same training without SLURM: torchrun's processes on this machine, one thread each (as the jobs)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [str(VENV_BIN / "torchrun"), "--nproc_per_node", str(nproc), "--master_port", str(free_port_block(1)),
           "-m", "omnidecision.sft.train", "--config", RECIPE, "--resume_from_checkpoint", "true", *args]
    with log.open("w") as f:
        subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=900)


def submit_sft(cluster: Cluster, nodes: int, args: list[str], log: Path, port: int) -> str:
    env_args = dict(GPUS_PER_NODE="0", MASTER_PORT=str(port))
    cluster.env.update(env_args)
    try:
        return cluster.sbatch(f"--nodes={nodes}", "--gres=none", "--cpus-per-task=1", "--mem=3G", f"--output={log}",
                              f"--error={log}", "--open-mode=append", SCRIPT, RECIPE, ACCEL, *args)
    finally:
        for k in env_args:
            cluster.env.pop(k)


def test_sft_on_two_nodes_equals_two_local_processes(slurm_cluster: Cluster, sft_inputs, tmp_path: Path,
                                                     slurm_results: dict):
    model, data = sft_inputs
    on_slurm, here = tmp_path / "slurm", tmp_path / "local"
    start = time.monotonic()
    job = submit_sft(slurm_cluster, 2, overrides(model, data, on_slurm, 12, 6), tmp_path / "sft.out",
                     free_port_block(1))
    record = slurm_cluster.wait(job, timeout=900)[0]
    log = (tmp_path / "sft.out").read_text(errors="replace")  # a kill can cut a progress bar mid-character
    assert record["JobState"] == "COMPLETED", log[-3000:]
    assert record["NodeList"] == "n[1-2]"
    assert "rank 0/2" in log and "rank 1/2" in log  # one process a node, one world of two
    slurm_s = time.monotonic() - start
    start = time.monotonic()
    local_run(overrides(model, data, here, 12, 6), 2, tmp_path / "local.out")
    local_s = time.monotonic() - start
    assert [s for s, _ in losses(on_slurm)] == [s for s, _ in losses(here)] == list(range(1, 13))
    # stated tolerance: 1e-6 relative, step by step
    assert [v for _, v in losses(on_slurm)] == pytest.approx([v for _, v in losses(here)], rel=1e-6)
    assert weights(on_slurm) == weights(here)  # measured: bit-identical (gloo, one thread a process)
    slurm_results["sft_two_nodes"] = {
        "what": "12 steps, one process on each of n1 and n2 (sft.slurm, GPUS_PER_NODE=0) against torchrun's two "
                "processes here", "equal_losses": True, "identical_weights": True,
        "slurm_wall_s": round(slurm_s, 1), "local_wall_s": round(local_s, 1)}


STEP_LOG = re.compile(r"\{'loss': ")


def requeue_after_first_checkpoint(cluster: Cluster, job: str, out: Path, first: int, timeout: float = 600) -> int:
    """Requeue the job a few steps after checkpoint-`first` is complete; the step it had reached (its trainer
    state's newest logged step, read from the job's own log by the caller)."""
    deadline = time.monotonic() + timeout
    while not (out / f"checkpoint-{first}" / "trainer_state.json").exists():
        assert time.monotonic() < deadline, f"no checkpoint-{first} after {timeout} s: {cluster.jobs(job)}"
        assert cluster.states(job)[0] in ("PENDING", "RUNNING", "CONFIGURING"), cluster.jobs(job)
        time.sleep(0.2)
    time.sleep(3)  # a few steps past the checkpoint
    cluster.requeue(job)
    return first


@pytest.mark.parametrize("save_on_sigterm", [True, False], ids=["sigterm-checkpoint", "no-sigterm-checkpoint"])
def test_requeued_sft_resumes_to_the_uninterrupted_weights(slurm_cluster: Cluster, sft_inputs, tmp_path: Path,
                                                           save_on_sigterm: bool, slurm_results: dict):
    model, data = sft_inputs
    steps, save = 120, 40
    args = [*overrides(model, data, tmp_path / "slurm", steps, save), "--save_on_sigterm", str(save_on_sigterm)]
    job = submit_sft(slurm_cluster, 1, args, tmp_path / "sft.out", free_port_block(1))
    requeue_after_first_checkpoint(slurm_cluster, job, tmp_path / "slurm", save)
    record = slurm_cluster.wait(job, timeout=900, until={"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"})[0]
    log = (tmp_path / "sft.out").read_text(errors="replace")  # a kill can cut a progress bar mid-character
    assert record["JobState"] == "COMPLETED" and record["Restarts"] == "1", log[-3000:]
    assert "DUE TO JOB REQUEUE" in log
    run = json.loads((tmp_path / "slurm" / "sft_run.json").read_text())
    assert run["global_step"] == steps  # the step counter continued: the uninterrupted run's step count
    resumed_from = int(run["resumed_from"].rsplit("-", 1)[1])
    executed = len(STEP_LOG.findall(log))  # one logged line a step, in both starts of the job
    lost = executed - steps
    if save_on_sigterm:
        assert "saved checkpoint-" in log and "on SIGTERM" in log
        assert resumed_from > save and lost <= 1, (resumed_from, lost)  # at most the step in flight
    else:
        assert resumed_from == save and lost >= 1, (resumed_from, lost)
    print(f"save_on_sigterm={save_on_sigterm}: resumed from step {resumed_from}, steps lost {lost}")

    local_run(overrides(model, data, tmp_path / "local", steps, save), 1, tmp_path / "local.out")
    assert losses(tmp_path / "slurm")[-1] == pytest.approx(losses(tmp_path / "local")[-1], rel=1e-6)
    assert weights(tmp_path / "slurm") == weights(tmp_path / "local")
    slurm_results.setdefault("sft_requeue", {})["save_on_sigterm" if save_on_sigterm else "no_sigterm_checkpoint"] = {
        "what": f"{steps} steps, checkpoints every {save}; scontrol requeue ~3 s after checkpoint-{save}",
        "resumed_from_step": resumed_from, "steps_lost": lost, "final_step": run["global_step"],
        "identical_weights": True}
