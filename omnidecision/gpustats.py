"""Peak GPU memory of one `omnidecision` process, for scripts that measure stages (scripts/gpu_smoke.sh).

With `OMNIDECISION_GPU_STATS=FILE` in the environment, every `omnidecision` command appends one JSON line to FILE
when its process exits: the command line, wall seconds, and per visible CUDA device `torch.cuda.max_memory_allocated`
and `max_memory_reserved` (bytes). Memory is null when the process never used CUDA (a CPU run, a dry run, or a
command whose GPU work happens in another process, such as the vLLM server that `serve` starts). Without the
variable nothing is registered and torch is not imported.

    OMNIDECISION_GPU_STATS=runs/smoke/gpu.jsonl omnidecision sft --config configs/sft/gpu-smoke-tiny.yaml
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ENV = "OMNIDECISION_GPU_STATS"


def snapshot() -> dict[str, Any]:
    """Peak memory per CUDA device of this process (empty when CUDA was never initialised here)."""
    torch = sys.modules.get("torch")  # never import torch just to measure: a process without it used no GPU
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    return {str(i): {"max_memory_allocated": torch.cuda.max_memory_allocated(i),
                     "max_memory_reserved": torch.cuda.max_memory_reserved(i),
                     "name": torch.cuda.get_device_name(i)}
            for i in range(torch.cuda.device_count())}


def _write(path: Path, argv: list[str], start: float) -> None:
    devices = snapshot()
    record = {"argv": argv, "pid": os.getpid(), "wall_s": round(time.monotonic() - start, 3),
              "devices": devices or None,
              "max_memory_allocated": max((d["max_memory_allocated"] for d in devices.values()), default=None)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
    except OSError as exc:  # measuring must never turn a finished command into a failed one
        print(f"warning: {ENV}: could not write {path}: {exc}", file=sys.stderr)


def install() -> bool:
    """Register the exit record when `OMNIDECISION_GPU_STATS` is set; returns whether it did."""
    target = os.environ.get(ENV)
    if not target:
        return False
    atexit.register(_write, Path(target), list(sys.argv), time.monotonic())
    return True
