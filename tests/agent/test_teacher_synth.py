"""Acceptance: the agent with the scripted teacher solves synthetic tasks end to end (real tools registry) and
every trajectory passes `omnidecision replay`."""

from __future__ import annotations

import asyncio
import collections

import pytest
from typer.testing import CliRunner

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.agent.replay import check_run
from omnidecision.backends.factory import build_backends
from omnidecision.cli import app
from omnidecision.protocol.chat import BackendSpec
from omnidecision.tasks import synth


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    synth.write_suite(24, 0, out)
    return out, synth.load_suite(out)


def run_all(tasks, config, noise=0.0):
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": noise})})

    async def main():
        return await asyncio.gather(*[run_task(t, config, backends, sample=0) for t in tasks])

    return asyncio.run(main())


def test_teacher_solves_the_synthetic_suite_and_every_run_replays(suite, tmp_path):
    _, tasks = suite
    records = run_all(tasks, AgentConfig())
    by_id = {t.id: t for t in tasks}
    for r in records:
        task = by_id[r.task_id]
        if task.answerable:
            assert (r.outcome, r.answer) == ("accepted", task.answer), (r.task_id, r.outcome, r.error)
        else:
            assert r.outcome == "insufficient", r.task_id
        assert r.totals.invalid_actions == 0 and r.error is None
    assert sum(by_id[r.task_id].answerable for r in records) >= len(records) // 2
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in records))
    result = CliRunner().invoke(app, ["replay", str(path)])
    assert result.exit_code == 0, result.output
    assert f"ok: {len(records)} runs replay exactly" in result.output


def test_noisy_teacher_runs_complete_and_replay(suite):
    _, tasks = suite
    records = run_all(tasks, AgentConfig(step_budget=10), noise=0.3)
    assert all(r.outcome != "error" for r in records), [r.error for r in records if r.error]
    assert all(check_run(r) is None for r in records)
    outcomes = collections.Counter(r.outcome for r in records)
    assert outcomes["accepted"] >= 1


@pytest.mark.parametrize("mode", ["react", "memory"])
def test_baselines_run_the_suite_with_the_same_tools(suite, mode):
    _, tasks = suite
    records = run_all(tasks, AgentConfig(mode=mode))
    assert all(r.outcome in ("accepted", "forced", "budget") for r in records), [r.error for r in records]
    assert sum(r.answer == r.gold_answer for r in records if r.gold_answer) >= 1
    assert all(set(r.totals.tool_calls) <= {"subtitle_grounding", "audio_scouting", "clip_grounding",
                                             "frame_confirmation", "web_search", "page_reader", "code_executor"}
               for r in records)


def test_run_command_prints_the_outcome(suite, tmp_path):
    out_dir, tasks = suite
    out = tmp_path / "one.jsonl"
    result = CliRunner().invoke(app, ["run", "--tasks", str(out_dir), "--task-id", tasks[0].id, "--teacher",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"{tasks[0].id}-s0-" in result.output and "outcome=" in result.output
    assert CliRunner().invoke(app, ["replay", str(out)]).exit_code == 0


def test_samples_draw_their_own_noise_and_replay_runs_are_labelled(suite):
    _, tasks = suite
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": 0.5})})

    async def main():
        return await asyncio.gather(*[run_task(t, AgentConfig(), backends, sample=s, services={"replay": True})
                                      for t in tasks for s in (0, 1)])

    records = asyncio.run(main())
    by_task = collections.defaultdict(list)
    for r in records:
        assert r.replay  # the environment said it replays: every record must say so
        by_task[r.task_id].append([s.raw_output for s in r.steps])
    assert any(a != b for a, b in by_task.values())  # with noise 0.5 some sample pair must differ
