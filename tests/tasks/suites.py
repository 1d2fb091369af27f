"""The synthetic suite the collect and rollout tests run on (omnidecision.tasks.synth): 60 tasks of seed 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnidecision.tasks.synth import write_suite

SUITE_TASKS, SUITE_SEED = 60, 3


def synth_suite(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """The suite written under a fresh temporary folder named `name` (for a session fixture)."""
    out = tmp_path_factory.mktemp(name)
    write_suite(SUITE_TASKS, SUITE_SEED, out)
    return out
