"""scripts/slurm/grpo.slurm submitted for real to the local two-node cluster on CPU nodes (GPUS_PER_NODE=0).

- Node roles: the last node serves the reward judge with vLLM's CPU build (`omnidecision serve`), the other trains
  and calls it (`judge_weight` inside the closure reward). Lines not exercised on CPU: TRL's `trl vllm-serve`
  generation server and its weight sync (NCCL, CUDA only: the script refuses `use_vllm` server mode with
  GPUS_PER_NODE=0), the GPU lists of the server node (GEN_GPUS/JUDGE_GPUS) and the multi-GPU `accelerate launch`.
- A requeue after the first checkpoint: the job resumes from the SIGTERM checkpoint to the uninterrupted run's step
  count and weights (the same run without SLURM, the same seed).

    make slurm-test     # or: .venv/bin/pytest -q -m slurm tests/slurm/test_grpo_slurm.py
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

pytestmark = [pytest.mark.slurm, pytest.mark.requires("trl", "vllm")]

RECIPE = "configs/grpo/tiny-cpu.yaml"
SCRIPT = "scripts/slurm/grpo.slurm"


@pytest.fixture(scope="module")
def grpo_inputs(tmp_path_factory) -> tuple[Path, Path]:
    """(tiny planner after a short SFT, RL states). The SFT makes some of its decisions valid, so the judge is asked
    about them (an invalid one is never sent); heads of 32 dimensions: vLLM's CPU attention does not take 16."""
    from omnidecision.rl.data import write_rl_dataset
    from omnidecision.synthetic.tiny import build_tiny_planner

    root = tmp_path_factory.mktemp("grpo-inputs")
    data = root / "sft-data"
    subprocess.run([str(VENV_BIN / "python"), "-m", "omnidecision.synthetic.states", str(data), "--train", "400",
                    "--validation", "16"], check=True, capture_output=True, cwd=ROOT)
    base = build_tiny_planner(root / "base", **TINY_KWARGS)
    sft = root / "planner"
    subprocess.run([str(VENV_BIN / "python"), "-m", "omnidecision.sft.train", "--config", "configs/sft/tiny-cpu.yaml",
                    "--model_name_or_path", str(base), "--dataset_name", str(data), "--output_dir", str(sft),
                    "--max_steps", "100", "--per_device_train_batch_size", "8", "--save_strategy", "no",
                    "--eval_strategy", "no", "--logging_steps", "50"],
                   check=True, capture_output=True, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=900)
    return sft, write_rl_dataset(root / "harvest", n_train=24, n_validation=8, seed=3)


def overrides(model: Path, data: Path, out: Path, steps: int, *extra: str) -> list[str]:
    return ["--model_name_or_path", str(model), "--dataset_name", str(data), "--output_dir", str(out),
            "--max_steps", str(steps), "--num_generations", "4", "--per_device_train_batch_size", "4",
            "--generation_batch_size", "8", "--max_completion_length", "16", "--eval_closure_n", "0",
            "--checkpoint_dev_n", "8", "--logging_steps", "1", "--save_strategy", "steps", "--save_total_limit", "10",
            *extra]


def submit(cluster: Cluster, nodes: int, args: list[str], log: Path, **env: str) -> str:
    knobs = {"GPUS_PER_NODE": "0", "ACCEL_CONFIG": "configs/accelerate/cpu.yaml",
             "MASTER_PORT": str(free_port_block(1)), **env}
    saved = dict(cluster.env)
    cluster.env.update(knobs)
    try:
        return cluster.sbatch(f"--nodes={nodes}", "--gres=none", "--exclusive", "--cpus-per-task=2", f"--output={log}",
                              "--open-mode=append", SCRIPT, RECIPE, *args)
    finally:
        cluster.env.clear()
        cluster.env.update(saved)


def weights(out: Path) -> str:
    return hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def test_grpo_trains_on_one_node_against_the_judge_served_on_the_other(slurm_cluster: Cluster, grpo_inputs,
                                                                        tmp_path: Path, slurm_results: dict):
    model, data = grpo_inputs
    out = tmp_path / "grpo"
    port = free_port_block(2)  # the judge's and the rendezvous' ports: two, distinct
    job = submit(slurm_cluster, 2, overrides(model, data, out, 2, "--save_steps", "2", "--judge_weight", "1.0",
                                             "--judge_timeout_s", "60"),
                 tmp_path / "grpo.out", JUDGE_MODEL=str(model), JUDGE_PORT=str(port), MASTER_PORT=str(port + 1),
                 JUDGE_MAX_LEN="4096")
    record = slurm_cluster.wait(job, timeout=1200)[0]
    log = (tmp_path / "grpo.out").read_text(errors="replace")
    judge_log = ROOT / "logs" / f"vllm-judge-{job}.log"
    served_tail = judge_log.read_text(errors="replace")[-2000:] if judge_log.exists() else ""
    assert record["JobState"] == "COMPLETED", log[-3000:] + served_tail
    assert record["NodeList"] == "n[1-2]"
    report = json.loads((out / "closure_eval.json").read_text())
    # the trainer on n1 asked the judge on n2 about its valid decisions, and the judge answered
    judge = report.get("judge", {})
    assert judge.get("requests", 0) > 0 and judge.get("successes", 0) + judge.get("failed", 0) > 0, judge
    assert not {r for r in judge.get("failures", {}) if "connect" in r.lower()}, judge  # reached, not refused
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    slurm_results["grpo_judge_node"] = {"what": "2 GRPO steps on n1, the judge served by vLLM (CPU) on n2",
                                        "judge": report["judge"]}


STEP_LOG = re.compile(r"\{'loss': ")
RESUMED = re.compile(r"resuming from \S*checkpoint-(\d+)")


@pytest.mark.parametrize("save_on_sigterm", [True, False], ids=["sigterm-checkpoint", "no-sigterm-checkpoint"])
def test_requeued_grpo_resumes_to_the_uninterrupted_weights(slurm_cluster: Cluster, grpo_inputs, tmp_path: Path,
                                                            slurm_results: dict, save_on_sigterm: bool):
    model, data = grpo_inputs
    steps, save = 8, 2
    args = overrides(model, data, tmp_path / "slurm", steps, "--save_steps", str(save), "--save_on_sigterm",
                     str(save_on_sigterm))
    job = submit(slurm_cluster, 1, args, tmp_path / "grpo.out", JUDGE_MODEL="none")
    first = tmp_path / "slurm" / f"checkpoint-{save}" / "trainer_state.json"
    deadline = time.monotonic() + 900
    while not first.exists():
        assert time.monotonic() < deadline and slurm_cluster.states(job)[0] in ("PENDING", "RUNNING"), \
            slurm_cluster.jobs(job)
        time.sleep(0.2)
    slurm_cluster.requeue(job)
    record = slurm_cluster.wait(job, timeout=1200, until={"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"})[0]
    log = (tmp_path / "grpo.out").read_text(errors="replace")
    assert record["JobState"] == "COMPLETED" and record["Restarts"] == "1", log[-3000:]
    assert "DUE TO JOB REQUEUE" in log
    state = json.loads((tmp_path / "slurm" / "trainer_state.json").read_text())
    assert state["global_step"] == steps
    sigterm = "saved checkpoint-" in log and "on SIGTERM" in log
    assert sigterm == save_on_sigterm, log[-3000:]
    resumed = [int(m) for m in RESUMED.findall(log)]
    assert resumed and resumed[-1] >= save, log[-3000:]
    lost = len(STEP_LOG.findall(log)) - steps  # one logged line a step, in both starts of the job
    assert lost >= 0 and (lost <= 1 if save_on_sigterm else resumed[-1] == save), (resumed, lost)
    print(f"grpo requeue save_on_sigterm={save_on_sigterm}: resumed from step {resumed[-1]}, steps lost {lost}")

    local = tmp_path / "local"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([str(VENV_BIN / "python"), "-m", "omnidecision.rl.train", "--config", RECIPE,
                    *overrides(model, data, local, steps, "--save_steps", str(save))],
                   check=True, cwd=ROOT, env=env, capture_output=True, timeout=1200)
    identical = weights(tmp_path / "slurm") == weights(local)
    slurm_results.setdefault("grpo_requeue", {})["save_on_sigterm" if save_on_sigterm else "no_sigterm_checkpoint"] = {
        "what": f"{steps} steps, checkpoints every {save}; requeued once checkpoint-{save} is complete",
        "sigterm_checkpoint": sigterm, "resumed_from_step": resumed[-1], "steps_lost": lost,
        "final_step": state["global_step"], "identical_weights": identical}
    assert identical
