"""Shared fixtures of the collect/harvest tests: a small synthetic suite, a teacher collection, a harvest."""

from __future__ import annotations

import asyncio
import functools
import sys
from pathlib import Path

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.collect.harvest import HarvestOptions, run_harvest
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.runner import run_tasks
from omnidecision.tasks.loaders import load_tasks
from tests.tasks.suites import synth_suite

CLI = [sys.executable, "-c", "from omnidecision.cli import app; app()"]


def teacher_recipe(tasks: Path, out: Path, **extra: object) -> str:
    """A recipe YAML text: the scripted teacher (with noise) for every role."""
    lines = [f"tasks: {{path: '{tasks}', format: synthetic}}",
             "backends: {default: {kind: teacher, options: {noise: 0.15, seed: 0}}}",
             "samples: 2", "concurrency: 8", f"out: '{out}'", "progress: false"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_suite(tmp_path_factory, "synth")


@pytest.fixture(scope="session")
def teacher_runs(synth_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished collection folder (60 tasks × 2 samples, teacher with noise, judged)."""
    out = tmp_path_factory.mktemp("teacher-runs")
    tasks = load_tasks(synth_dir, "synthetic")
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": 0.15, "seed": 0})})
    asyncio.run(run_tasks(tasks, AgentConfig(), backends, RolloutOptions(
        out_file=shard_path(out, 0, 1), samples=2, concurrency=8, progress=False)))
    return out


@pytest.fixture(scope="session")
def harvested(teacher_runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("harvest") / "h"
    run_harvest([str(teacher_runs)], out, HarvestOptions(val_fraction=0.2))
    return out


@pytest.fixture(scope="session")
def tiny_planner(harvested: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3 planner, tokenizer trained on the harvested prompts (fast to build)."""
    import datasets

    from omnidecision.synthetic.tiny import build_tiny_planner

    ds = datasets.load_dataset(str(harvested / "sft"), split="train")
    texts = [m["content"] for row in ds.select(range(min(200, len(ds)))) for m in row["messages"]]
    return build_tiny_planner(tmp_path_factory.mktemp("tiny"), texts=texts, hidden=32, layers=1, heads=2,
                              vocab_size=600)


@pytest.fixture
def write_video_file():
    """write_video_file(path): a one-second 64x48 mpeg4 video written with PyAV."""
    from tests.tools.videos import write_gray_video  # PyAV loads only for the tests that write a video

    return functools.partial(write_gray_video, frames=10, step=20)
