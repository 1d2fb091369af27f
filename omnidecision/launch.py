"""Multi-process launch of `omnidecision sft` / `omnidecision grpo` through `accelerate launch`.

`omnidecision grpo --config R.yaml` alone is one Python process: one GPU, no DeepSpeed. With
`--accelerate-config configs/accelerate/zero3.yaml` (and/or `--num-processes N`) the command re-runs the stage's
module under `accelerate launch`, one process per GPU, with the same recipe and overrides:

    omnidecision grpo --accelerate-config configs/accelerate/zero3.yaml \
        --config configs/grpo/qwen3-8b-vllm-colocate.yaml
    # runs: python -m accelerate.commands.launch --config_file configs/accelerate/zero3.yaml \
    #           -m omnidecision.rl.train --config configs/grpo/qwen3-8b-vllm-colocate.yaml
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Sequence

# the module each stage runs under accelerate (its `__main__` parses the same recipe + overrides)
STAGE_MODULES = {"sft": "omnidecision.sft.train", "grpo": "omnidecision.rl.train"}


def accelerate_command(stage: str, stage_args: Sequence[str], *, config_file: str | None = None,
                       num_processes: int | None = None, python: str | None = None) -> list[str]:
    """The `accelerate launch` command line that runs `stage` with `stage_args` (recipe and overrides).

    >>> accelerate_command("grpo", ["--config", "r.yaml"], num_processes=8, python="python")[3:6]
    ['--multi_gpu', '--num_processes', '8']
    >>> accelerate_command("grpo", ["--config", "r.yaml"], num_processes=8, python="python")[-4:]
    ['-m', 'omnidecision.rl.train', '--config', 'r.yaml']
    """
    if stage not in STAGE_MODULES:
        raise ValueError(f"no accelerate launch for stage {stage!r} (known: {sorted(STAGE_MODULES)})")
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"--num-processes must be >= 1, got {num_processes}")
    cmd = [python or sys.executable, "-m", "accelerate.commands.launch"]
    if config_file is not None:
        cmd += ["--config_file", str(config_file)]
    elif num_processes is not None and num_processes > 1:
        cmd += ["--multi_gpu"]  # without a config file: plain data parallel (DDP)
    if num_processes is not None:
        cmd += ["--num_processes", str(num_processes)]
    return [*cmd, "-m", STAGE_MODULES[stage], *stage_args]


def run(cmd: Sequence[str]) -> int:
    """Run the launcher in the foreground; its exit code (a signal to this process reaches the whole group)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(list(cmd), env=env).returncode


def render(cmd: Sequence[str]) -> str:
    return shlex.join(list(cmd))
