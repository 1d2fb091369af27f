"""Shared fixtures of the rollout tests: a synthetic suite and the collection teacher's runs over it (the teacher with
habits, as the demo collects), through the real loop, tools and reducer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.backends.factory import build_backends
from omnidecision.backends.teacher import HABIT_TEACHER
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.records import RunRecord
from omnidecision.tasks.schema import Task
from omnidecision.tasks.synth import load_suite
from tests.tasks.suites import synth_suite

# the agent settings of configs/collect/synthetic-habits.yaml
HABITS_CONFIG = AgentConfig(digest_max_chars=1000, planner_system_prompt=False)
TEACHER_SPECS = {"default": BackendSpec(kind="teacher", options=HABIT_TEACHER)}


@pytest.fixture(scope="session")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_suite(tmp_path_factory, "rollout-synth")


@pytest.fixture(scope="session")
def tasks(suite_dir: Path) -> dict[str, Task]:
    return {t.id: t for t in load_suite(suite_dir)}


@pytest.fixture(scope="session")
def habit_runs(tasks: dict[str, Task]) -> list[RunRecord]:
    """One run per task (sample 0) of the teacher with habits."""
    backends = build_backends(TEACHER_SPECS)

    async def collect() -> list[RunRecord]:
        return list(await asyncio.gather(*(run_task(t, HABITS_CONFIG, backends) for t in tasks.values())))

    return asyncio.run(collect())
