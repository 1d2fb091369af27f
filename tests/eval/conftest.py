"""Shared fixtures: a small synthetic suite and an eval recipe that runs it with the scripted teacher."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory) -> Path:
    from omnidecision.tasks.synth import write_suite

    out = tmp_path_factory.mktemp("synth")
    write_suite(16, 3, out)
    return out


def teacher_recipe(synth_dir: Path, out: Path, judge: dict | None = None, **agent):
    from omnidecision.eval.runner import eval_recipe_from_dict

    return eval_recipe_from_dict({
        **({"judge": judge} if judge is not None else {}),
        "name": "teacher",
        "tasks": {"path": str(synth_dir), "format": "synthetic"},
        # noise makes the teacher err (wrong tools, premature finishes, missed conflicts): every report part used
        "backends": {"default": {"kind": "teacher", "options": {"noise": 0.35, "seed": 1}}},
        "agent": {"mode": "ledger", "step_budget": 15, **agent},
        "samples": 2,
        "concurrency": 4,
        "out": str(out),
        "progress": False,
        "plots": True,
    })
