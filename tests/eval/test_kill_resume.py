"""Kill and resume (issue 10, item 1): an eval process SIGKILLed mid-run and restarted ends with the same records
as an uninterrupted eval — none lost, none duplicated, no corrupt line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from omnidecision.eval.runner import load_records, run_eval

from .conftest import teacher_recipe


def _lines(path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _kill_mid_run(synth_dir, out, cfg, samples: int, after_lines: int):
    """Start an eval of `samples` per task, SIGKILL its process group once `after_lines` records are on disk;
    returns (recipe, records on disk at the kill, return code)."""
    recipe = teacher_recipe(synth_dir, out).model_copy(update={"samples": samples, "concurrency": 1})
    cfg.write_text(yaml.safe_dump(recipe.model_dump(mode="json")))
    traj = out / "trajectories.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "omnidecision.eval.runner", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while proc.poll() is None and _lines(traj) < after_lines:
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    return recipe, _lines(traj), proc.returncode


def test_sigkill_then_resume(synth_dir, tmp_path):
    # The kill must land mid-run: retried with an earlier kill and a longer run until it does (never skipped).
    tries = [(4, 5), (8, 2), (16, 1), (32, 1), (64, 1)]
    for attempt, (samples, after_lines) in enumerate(tries):
        out = tmp_path / f"killed-{attempt}"
        recipe, before, rc = _kill_mid_run(synth_dir, out, tmp_path / f"recipe-{attempt}.yaml", samples, after_lines)
        total = 16 * samples
        if 0 < before < total and rc == -signal.SIGKILL:
            break
    else:
        pytest.fail(f"the kill never landed mid-run in {len(tries)} tries (last: {before} of {total} records)")
    traj = out / "trajectories.jsonl"

    rep = run_eval(recipe, progress=False)  # the restart
    assert rep["skipped_runs"] == before and rep["new_runs"] == total - before
    lines = traj.read_text().splitlines()
    assert len(lines) == total and all(json.loads(x) for x in lines)  # no corrupt or torn line left
    keys = [(r.task_id, r.sample) for r in load_records(out)]
    assert len(set(keys)) == total

    clean = run_eval(recipe.model_copy(update={"out": str(tmp_path / "clean")}), progress=False)
    assert set(keys) == {(r.task_id, r.sample) for r in load_records(tmp_path / "clean")}
    assert (rep["correct"], rep["outcomes"]) == (clean["correct"], clean["outcomes"])
