"""Shared bench helpers: the machine description and writing a result file under bench/results/."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, object]:
    mem = None
    try:
        mem = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu,
            "cpus": os.cpu_count(), "memory_gib": mem}


def command_line() -> str:
    """The command that ran this benchmark, with the script path relative to the repository (no machine path)."""
    root = RESULTS.parent.parent.resolve()
    args = list(sys.argv)
    if args and Path(args[0]).is_absolute():
        try:
            args[0] = str(Path(args[0]).resolve().relative_to(root))
        except ValueError:
            args[0] = Path(args[0]).name
    return " ".join([Path(sys.executable).name, *args])


def write_result(name: str, payload: dict[str, Any]) -> Path:
    """bench/results/<name>.json with the command and the machine added."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    full = {"command": command_line(), "machine": machine(), **payload}
    out.write_text(json.dumps(full, indent=2), "utf-8")
    return out
