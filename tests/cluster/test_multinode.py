"""Multi-node launches: the by-hand instructions of the GRPO server recipe form ONE accelerate job over the training
nodes (parsed by accelerate's own launch parser, held against what scripts/slurm/grpo.slurm writes per node), and
the SLURM scripts' training steps get the node's CPUs (`--cpus-per-task` on their srun lines, seen in their dry runs).

    .venv/bin/pytest tests/cluster/test_multinode.py -q
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from omnidecision.node_launch import node_command

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "configs" / "grpo" / "qwen3-8b-lora-vllm-server.yaml"
NODE_LINE = re.compile(r"^#\s+(NODE_\w+):\s+(.*)$")


def by_hand_commands(path: Path) -> dict[str, list[list[str]]]:
    """node → the commands the recipe's comment lines give it (continuation lines joined)."""
    out: dict[str, list[list[str]]] = {}
    node, buf = None, ""
    for line in path.read_text("utf-8").splitlines():
        if not line.startswith("#"):
            break
        if buf:  # a continuation of the previous command
            buf += " " + line.lstrip("# ").rstrip()
        elif (m := NODE_LINE.match(line)) is not None:
            node, buf = m.group(1), m.group(2).rstrip()
        if buf and not buf.endswith("\\"):
            text = buf.split("   (")[0]  # a trailing remark in parentheses is not part of the command
            out.setdefault(node, []).append(shlex.split(text))
            buf = ""
        elif buf:
            buf = buf[:-1].rstrip()
    return out


def test_by_hand_training_nodes_form_one_job():
    from accelerate.commands.launch import launch_command_parser

    commands = by_hand_commands(SERVER)
    training = {node: cmds[0] for node, cmds in commands.items() if cmds[0][:2] == ["accelerate", "launch"]}
    assert len(training) >= 2, commands
    parser = launch_command_parser()
    parsed = {node: parser.parse_args(cmd[2:]) for node, cmd in training.items()}
    n = len(parsed)
    for node, args in parsed.items():
        assert args.num_machines == n, f"{node}: --num_machines {args.num_machines}, but {n} training nodes"
        assert args.num_processes == 8 * n, f"{node}: --num_processes is the job's total ({8 * n})"
        assert (ROOT / args.config_file).is_file() and args.module and args.training_script == "omnidecision.rl.train"
        assert args.training_script_args[:2] == ["--config", str(SERVER.relative_to(ROOT))]
        assert "--vllm_server_host" in args.training_script_args
    assert sorted(a.machine_rank for a in parsed.values()) == list(range(n))  # one rank each
    assert len({(a.main_process_ip, a.main_process_port) for a in parsed.values()}) == 1  # one rendezvous ...
    rank0 = next(node for node, a in parsed.items() if a.machine_rank == 0)
    assert next(iter(parsed.values())).main_process_ip == rank0  # ... on the rank-0 training node
    # the generation node serves the model the GRPO run starts from, and is not a training node
    assert "NODE_A" in commands and "NODE_A" not in training
    # the same launch flags as the SLURM script writes per node
    launch = (ROOT / "scripts" / "slurm" / "grpo.slurm").read_text("utf-8")
    for flag in ("--num_machines", "--num_processes", "--machine_rank", "--main_process_ip", "--main_process_port",
                 "--rdzv_backend"):
        assert flag in launch and all(flag in cmd for cmd in training.values()), flag


def _stand_in(tmp_path: Path, server: bool = True) -> Path:
    """An `omnidecision` whose pre-flight passes and prints the plan the GRPO script reads: generation on TRL's vLLM
    server (GPU nodes) or, `server=False`, in the trainer (CPU nodes)."""
    od = tmp_path / "od"
    plan = {"extra": {"generation_model": "Qwen/Qwen3-8B" if server else "tiny", "generation_server": server}}
    od.write_text(f"#!/bin/sh\necho '{json.dumps(plan)}'\n")
    od.chmod(0o755)
    return od


@pytest.mark.parametrize("script,args,cpus", [
    ("grpo.slurm", [str(SERVER)], "64"),
    ("sft.slurm", ["configs/sft/qwen3-8b-lora.yaml", "configs/accelerate/zero3.yaml"], "96"),
])
def test_training_srun_lines_pass_cpus_per_task(tmp_path, script, args, cpus):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(OD=str(_stand_in(tmp_path)), SLURM_NNODES="3")
    res = subprocess.run(["bash", str(ROOT / "scripts" / "slurm" / script), *args, "--dry-run"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    training = [line for line in res.stdout.splitlines() if line.startswith("srun") and "accelerate launch" in line]
    assert training and all(f"--cpus-per-task={cpus}" in line for line in training), res.stdout
    env["SLURM_CPUS_PER_TASK"] = "48"  # inside a job: the job's own value
    res = subprocess.run(["bash", str(ROOT / "scripts" / "slurm" / script), *args, "--dry-run"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert "--cpus-per-task=48" in res.stdout, res.stdout
    text = (ROOT / "scripts" / "slurm" / script).read_text("utf-8")
    real = re.findall(r'^srun .*?bash -c "\$LAUNCH"', text, flags=re.S | re.M)
    assert real and all("--cpus-per-task" in r for r in real)


@pytest.mark.parametrize("script,args", [
    ("grpo.slurm", [str(SERVER)]),
    ("sft.slurm", ["configs/sft/qwen3-8b-lora.yaml", "configs/accelerate/zero3.yaml"]),
])
def test_gpu_nodes_give_the_workers_the_clusters_kill_wait(tmp_path, script, args):
    """torchrun's agent under `accelerate launch` SIGKILLs its workers TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds after
    a SIGTERM (30 when unset): the training line sets it to the time SLURM gives, KillWait from `scontrol show
    config` (30, SLURM's default, where no scheduler answers) plus the job's partition's GraceTime."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCH_ELASTIC_"))}
    env.update(OD=str(_stand_in(tmp_path)), SLURM_NNODES="3")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"  # first on PATH: no scheduler answers, then one whose KillWait is 120 s, in a
    # job on a partition whose preemption waits GraceTime=60 before it cancels
    config = "echo 'KillWait                = 120 sec'"
    partition = "echo 'PartitionName=gpu AllowGroups=ALL PreemptMode=REQUEUE GraceTime=60 Hidden=NO'"
    for kill_wait, answer, job in (("30", "exit 1", {}), ("180", config, {"SLURM_JOB_PARTITION": "gpu"})):
        scontrol.write_text(f"#!/bin/sh\n[ \"$1 $2\" = 'show config' ] && {answer}\n"
                            f"[ \"$1 $2 $3\" = 'show partition gpu' ] && {partition}\nexit 1\n")
        scontrol.chmod(0o755)
        res = subprocess.run(["bash", str(ROOT / "scripts" / "slurm" / script), *args, "--dry-run"], cwd=ROOT,
                             env={**env, **job, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        training = [line for line in res.stdout.splitlines() if line.startswith("srun") and 'bash -c "' in line]
        assert training and all(f"TORCH_ELASTIC_SHUTDOWN_TIMEOUT={kill_wait} accelerate launch" in line
                                for line in training), res.stdout


@pytest.mark.parametrize("script,args,module", [
    ("grpo.slurm", ["configs/grpo/tiny-cpu.yaml"], "omnidecision.rl.train"),
    ("sft.slurm", ["configs/sft/tiny-cpu.yaml", "configs/accelerate/cpu.yaml"], "omnidecision.sft.train"),
])
def test_cpu_nodes_run_the_trainer_as_the_task_through_node_launch(tmp_path, script, args, module):
    """GPUS_PER_NODE=0: the training line starts `omnidecision.node_launch` (the trainer exec'd, so a requeue's
    SIGTERM reaches it alone), and its arguments are accelerate's single-process launch of the stage's module."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(OD=str(_stand_in(tmp_path, server=False)), SLURM_NNODES="2", GPUS_PER_NODE="0", JUDGE_MODEL="none",
               ACCEL_CONFIG="configs/accelerate/cpu.yaml")
    res = subprocess.run(["bash", str(ROOT / "scripts" / "slurm" / script), *args, "--dry-run"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    training = [line for line in res.stdout.splitlines() if line.startswith("srun") and 'bash -c "' in line]
    assert len(training) == 1, res.stdout
    launch = shlex.split(training[0].split('bash -c "', 1)[1].rstrip('"'))
    while "=" in launch[0]:  # RANK=..., MASTER_ADDR=...: the environment of the task
        launch.pop(0)
    assert launch[1:3] == ["-m", "omnidecision.node_launch"] and "accelerate" not in launch[:3], launch
    cmd, _ = node_command([a.replace("$SLURM_PROCID", "0") for a in launch[3:]])
    assert cmd[1:3] == ["-m", module], cmd


def test_gpu_recipes_bound_the_completions_printed():
    import yaml

    for path in sorted((ROOT / "configs" / "grpo").glob("qwen3-8b-*.yaml")):
        recipe = yaml.safe_load(path.read_text("utf-8"))
        if recipe.get("log_completions"):
            limit = recipe.get("num_completions_to_print")
            assert limit is not None and 0 <= limit <= 8, f"{path.name}: log_completions without a bound"


def test_serve_start_timeout_suits_an_8b_cold_start():
    """One default for every way the project starts vLLM (the eval recipe's `serve:` block, `omnidecision serve`,
    `VLLMServer`), long enough for an 8B cold start; the server GRPO recipe gives TRL's client as long."""
    import inspect

    import yaml

    from omnidecision.eval.cli import serve
    from omnidecision.rollout.recipe import ServeSpec
    from omnidecision.serving.vllm_server import STARTUP_TIMEOUT_S, VLLMServer

    assert STARTUP_TIMEOUT_S >= 900
    assert ServeSpec(model="m").startup_timeout_s == STARTUP_TIMEOUT_S
    assert inspect.signature(VLLMServer).parameters["startup_timeout_s"].default == STARTUP_TIMEOUT_S
    assert inspect.signature(serve).parameters["startup_timeout"].default.default == STARTUP_TIMEOUT_S
    assert ServeSpec(model="m", startup_timeout_s=60).startup_timeout_s == 60  # a recipe field
    assert yaml.safe_load(SERVER.read_text("utf-8"))["vllm_server_timeout"] >= STARTUP_TIMEOUT_S
