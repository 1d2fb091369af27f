"""What a restart of a plan in OUT keeps and what it stops: one answer for the run and for its dry run.

    kept_steps(plan, out)     # the steps a restart keeps, with their wall seconds
    leftovers(out)            # the steps a killed runner left running (OUT/running.json)
    finished_cell(plan, out)  # an experiment cell kept whole: summarised, every step of its plan recorded

A step is kept when an earlier run finished it (its wall time in OUT/stage_wall_s.json) and every output it writes
is still there. Every state file is read by `read_state`: one that cannot be read stops the run, and its dry run,
with one line naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from omnidecision.pipeline.plan import Step


def read_state(path: Path) -> dict[str, Any]:
    """A restart's state file (stage_wall_s.json, steps.json, running.json, slurm_jobs.json) as a dict ({} when
    absent); one line naming the file when it cannot be read (a file damaged outside the project: the restart cannot
    tell which steps finished)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise typer.Exit(f"{path}: not a readable state file ({type(exc).__name__}: {exc}); the restart cannot tell "
                         "which steps finished: repair it, or delete it to run every step again") from None
    if not isinstance(data, dict):
        raise typer.Exit(f"{path}: holds a {type(data).__name__}, not the object a restart reads; repair it, or "
                         "delete it to run every step again")
    return data


def producers(plan: list[Step]) -> dict[str, list[str]]:
    """step → the earlier steps whose outputs it reads (a read path equal to or inside a written path)."""
    out: dict[str, list[str]] = {}
    for i, step in enumerate(plan):
        deps = []
        for earlier in plan[:i]:
            if any(Path(r) == Path(w) or Path(w) in Path(r).parents for r in step.reads for w in earlier.writes):
                deps.append(earlier.name)
        out[step.name] = deps
    return out


def kept_steps(plan: list[Step], out: Path) -> dict[str, float]:
    """The steps of `plan` a restart in `out` keeps, with their wall seconds (see the module's docstring). The
    state files the run reads are read here too, so a damaged one stops the dry run as it stops the run."""
    done = read_state(out / "stage_wall_s.json")
    read_state(out / "steps.json")
    return {s.name: done[s.name] for s in plan if s.name in done and all(Path(w).exists() for w in s.writes)}


def finished_cell(plan: list[Step], out: Path) -> bool:
    """Whether an experiment cell in `out` is kept whole: its summary.json is there and every step of the plan it
    would run now is recorded finished (OUT/stage_wall_s.json), whatever its steps' files (a finished cell's models
    may be deleted to save disk). A cell summarised under a smaller plan (an arm or a replicate added to the recipe
    since) is not: its plan runs, keeping the finished steps (`kept_steps`), and it is summarised again."""
    if not (out / "summary.json").exists():
        return False
    done = read_state(out / "stage_wall_s.json")
    return all(s.name in done for s in plan)


def leftovers(out: Path) -> dict[str, int]:
    """The steps a killed runner left running (OUT/running.json): step → its process group."""
    return {name: pgid for name, pgid in read_state(out / "running.json").items() if isinstance(pgid, int)}
