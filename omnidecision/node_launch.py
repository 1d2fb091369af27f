"""One training process a node, run as the SLURM task itself: `accelerate launch`'s single-process path with `exec`.

The CPU path of scripts/slurm/sft.slurm and grpo.slurm (GPUS_PER_NODE=0) starts one trainer a node. SLURM ends a job
(`scontrol requeue`, preemption, `scancel`) by sending SIGTERM to every process of each step, SIGKILL KillWait seconds
later. `accelerate launch` on that path is a parent that answers its own SIGTERM by terminating the trainer and
SIGKILLing it 5 s later (accelerate 1.16: commands/launch.py `_run_subprocess`, `_terminate_process_tree`). A trainer
whose step in flight plus its SIGTERM checkpoint (omnidecision/preemption.py) takes longer than 5 s was killed before
it saved, and the requeued job redid every step since its last periodic checkpoint (docs/cluster/local-cluster.md,
"Preemption and requeue"; tests/slurm/test_node_launch_slurm.py).

This module takes accelerate's own arguments (its parser and config file), makes the command and environment
accelerate gives its child (`prepare_simple_launcher_cmd_env`), and becomes that command (`os.execvpe`): the trainer is
the task, the job's SIGTERM reaches it alone, and it has the whole KillWait to finish the step and save.

    python -m omnidecision.node_launch --config_file configs/accelerate/cpu.yaml --cpu --num_machines 2 \
        --num_processes 2 --machine_rank 0 --main_process_ip n1 --main_process_port 29500 \
        -m omnidecision.rl.train --config configs/grpo/tiny-cpu.yaml

GPU nodes keep `accelerate launch`: its multi-process path is torchrun's elastic agent, which SIGKILLs the workers
TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds after a SIGTERM (30 when unset); the scripts set it to the time SLURM gives
(`od_kill_wait`, scripts/slurm/lib.sh). That holds for DeepSpeed with `deepspeed_multinode_launcher: standard`, as in
configs/accelerate/zero*.yaml; DeepSpeed's pdsh launcher waits 5 s like the single-process path. An argument list
that asks for a multi-process path (DeepSpeed, FSDP, multi-GPU, TPU) is refused here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

# accelerate's own parsing and config-file merging, so the flags and the environment are exactly `accelerate
# launch`'s; `_validate_launch_command` is private API (tests/cluster/test_node_launch.py holds the environment equal
# to the one `accelerate launch` gives its child, so a change in accelerate fails there)
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import ComputeEnvironment, prepare_simple_launcher_cmd_env


class NodeLaunchError(ValueError):
    """The arguments ask for a launch this single-process path does not make."""


def _multi_process_launcher(args, defaults) -> str | None:
    """Which of accelerate's other launchers `accelerate launch` would pick for `args` (its own order), else None."""
    if not args.cpu:
        for flag, launcher in (("use_deepspeed", "DeepSpeed"), ("use_fsdp", "FSDP"),
                               ("use_megatron_lm", "Megatron-LM"), ("multi_gpu", "multi-GPU"), ("tpu", "TPU")):
            if getattr(args, flag, False):
                return launcher
    if defaults is not None and defaults.compute_environment == ComputeEnvironment.AMAZON_SAGEMAKER:
        return "SageMaker"
    return None


def node_command(argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The trainer's command and environment, as `accelerate launch ARGV` would start its one child."""
    # indexed, not unpacked: a change in what the private call returns fails as an error of the code (a traceback),
    # not as a ValueError that `main` would print as a wrong argument
    validated = _validate_launch_command(launch_command_parser().parse_args(list(argv)))
    args, defaults = validated[0], validated[1]
    if (launcher := _multi_process_launcher(args, defaults)) is not None:
        raise NodeLaunchError(f"these arguments select accelerate's {launcher} launcher, not its single-process one: "
                              "run them with `accelerate launch` (GPU nodes), or add --cpu")
    return prepare_simple_launcher_cmd_env(args)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    try:
        cmd, env = node_command(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:  # NodeLaunchError, or a value accelerate refuses (an unknown mixed_precision)
        print(f"node_launch: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(cmd[0], cmd, env)


if __name__ == "__main__":
    main()
