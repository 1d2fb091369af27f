"""Kill and resume: SIGKILL `omnidecision collect` part-way, restart it, and nothing is lost or duplicated."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.engine import run_rollouts
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.recipe import load_recipe
from omnidecision.rollout.runner import run_tasks
from omnidecision.rollout.store import read_records
from omnidecision.tasks.loaders import load_tasks

from .conftest import CLI, teacher_recipe


def _complete_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _start(recipe: Path) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "collect", "--config", str(recipe), "--concurrency", "8", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _kill_after(proc: subprocess.Popen, path: Path, lines: int) -> bool:
    """SIGKILL `proc` once `path` holds `lines` complete lines; False when it finished first.

    The process runs in 20 ms slices (SIGCONT, sleep, SIGSTOP) and the file is read while it is stopped, so a fast
    machine cannot write the whole collection between two looks and a slow one is simply given more slices."""
    while proc.poll() is None:
        os.killpg(proc.pid, signal.SIGCONT)
        time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGSTOP)
        if _complete_lines(path) >= lines:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
    return False


def _outcomes(path: Path) -> dict[tuple[str, int], tuple]:
    out = {}
    for _, r in read_records(path):
        assert (r.task_id, r.sample) not in out, f"duplicate record {(r.task_id, r.sample)}"
        out[(r.task_id, r.sample)] = (r.outcome, r.answer, r.judge.correct if r.judge else None, len(r.steps))
    return out


def _reference(synth_dir: Path, tmp: Path) -> dict[tuple[str, int], tuple]:
    """The same collection, uninterrupted (in process)."""
    tasks = load_tasks(synth_dir, "synthetic")
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": 0.15, "seed": 0})})
    f = tmp / "ref.jsonl"
    asyncio.run(run_tasks(tasks, AgentConfig(), backends, RolloutOptions(out_file=f, samples=2, concurrency=3,
                                                                          progress=False)))
    return _outcomes(f)


def test_sigkill_then_restart_loses_and_duplicates_nothing(synth_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(teacher_recipe(synth_dir, out), encoding="utf-8")
    shard = shard_path(out, 0, 1)
    proc = _start(recipe)
    killed = _kill_after(proc, shard, 10)
    assert killed, f"the collection finished before the kill; stderr:\n{proc.stderr.read().decode()[-2000:]}"
    before = _complete_lines(shard)
    assert 10 <= before < 120, before  # part-way
    proc = _start(recipe)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-2000:]
    got = _outcomes(shard)  # every line parses, no duplicate (task, sample)
    ids = [t.id for t in load_tasks(synth_dir, "synthetic")]
    assert set(got) == {(t, s) for t in ids for s in range(2)}
    assert got == _reference(synth_dir, tmp_path)  # the same result as an uninterrupted run


def test_restart_after_a_torn_last_line(synth_dir: Path, tmp_path: Path) -> None:
    recipe = load_recipe(None, [f"tasks.path={synth_dir}", "backends.default.kind=teacher", f"out={tmp_path}",
                                "tasks.limit=10", "progress=false"])
    first = asyncio.run(run_rollouts(recipe))
    shard = shard_path(tmp_path, 0, 1)
    data = shard.read_bytes()
    lines = data.splitlines(keepends=True)
    # simulate a kill in the middle of writing the last record: its line is cut in half
    shard.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    second = asyncio.run(run_rollouts(recipe))
    assert (first.done, second.done, second.skipped) == (10, 1, 9)
    assert Counter((r.task_id, r.sample) for _, r in read_records(shard)) == Counter(
        {(r.task_id, r.sample): 1 for _, r in read_records(shard)})
    assert len(list(read_records(shard))) == 10
    third = asyncio.run(run_rollouts(recipe))
    assert (third.done, third.skipped) == (0, 10)


def test_shards_together_cover_the_task_set(synth_dir: Path, tmp_path: Path) -> None:
    keys: list[tuple[str, int]] = []
    for i in range(3):
        recipe = load_recipe(None, [f"tasks.path={synth_dir}", "backends.default.kind=teacher", f"out={tmp_path}",
                                    f"shard={i}/3", "tasks.limit=24", "progress=false"])
        asyncio.run(run_rollouts(recipe))
        keys += [(r.task_id, r.sample) for _, r in read_records(shard_path(tmp_path, i, 3))]
    ids = [t.id for t in load_tasks(synth_dir, "synthetic")][:24]
    assert sorted(keys) == sorted((t, 0) for t in ids)
    assert len({shard for shard in range(3) if shard_path(tmp_path, shard, 3).stat().st_size}) == 3
    assert (tmp_path / "manifest.json").is_file()
    merged = tmp_path / "merged" / "all.jsonl"
    proc = subprocess.run([*CLI, "collect", "merge", str(tmp_path), "--out", str(merged)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted((r.task_id, r.sample) for _, r in read_records(merged)) == sorted(keys)


def test_a_different_agent_config_into_the_same_folder_is_refused(synth_dir: Path, tmp_path: Path) -> None:
    base = [f"tasks.path={synth_dir}", "backends.default.kind=teacher", f"out={tmp_path}", "tasks.limit=2",
            "progress=false"]
    asyncio.run(run_rollouts(load_recipe(None, base)))
    with pytest.raises(ValueError, match="different agent config"):
        asyncio.run(run_rollouts(load_recipe(None, [*base, "agent.step_budget=3"])))


@pytest.mark.slow
def test_random_kills_until_done(synth_dir: Path, tmp_path: Path) -> None:
    """Kill at random points (several times), restart each time: the final file equals an uninterrupted run."""
    out = tmp_path / "runs"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(teacher_recipe(synth_dir, out), encoding="utf-8")
    shard = shard_path(out, 0, 1)
    rng = random.Random(7)
    kills = 0
    for _ in range(6):
        proc = _start(recipe)
        if _kill_after(proc, shard, _complete_lines(shard) + rng.randint(1, 25)):
            kills += 1
    proc = _start(recipe)
    assert proc.wait(timeout=300) == 0
    assert kills >= 3
    assert _outcomes(shard) == _reference(synth_dir, tmp_path)
