"""The plan runner owns its steps: `kill -9` of `omnidecision demo|experiment` leaves none of its steps running (each
step leads its own process group and gets SIGTERM when the runner dies); a restart stops a step a killed runner left
behind before it runs it again; two runners on one folder: the second is refused.

    .venv/bin/pytest -q tests/demo/test_runner_owns_steps.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer

from omnidecision.pipeline.plan import Step
from omnidecision.pipeline.scheduler import run_plan, stop_leftovers
from omnidecision.procs import group_alive

ROOT = Path(__file__).resolve().parents[2]
RUNNER = """
import sys
from pathlib import Path
from omnidecision.pipeline.plan import Step
from omnidecision.pipeline.scheduler import run_plan
tasks, out = sys.argv[1], Path(sys.argv[2])
step = Step("collect", ["collect", "--config", "configs/collect/synthetic-teacher.yaml", "--tasks.path", tasks,
                        "--out", str(out / "col"), "--concurrency", "1", "--no-progress"], [tasks], [str(out / "col")])
run_plan([step], out, jobs=1)
"""


@pytest.fixture(scope="module")
def many_tasks(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tasks") / "synth"
    subprocess.run([sys.executable, "-m", "omnidecision.cli", "tasks", "synth", "--n", "400", "--seed", "0", "--out",
                    str(out)], check=True, capture_output=True, cwd=ROOT)
    return out


def test_kill_9_of_the_runner_leaves_no_step_running(many_tasks: Path, tmp_path: Path):
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(many_tasks), str(tmp_path)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    running, shard = tmp_path / "running.json", tmp_path / "col" / "trajectories.shard-0-of-1.jsonl"
    deadline = time.monotonic() + 300
    try:
        while not (shard.exists() and shard.read_bytes().count(b"\n") >= 5):
            assert runner.poll() is None and time.monotonic() < deadline, "the step did not start writing"
            time.sleep(0.2)
        pgid = json.loads(running.read_text())["collect"]
        assert group_alive(pgid)
        runner.kill()  # SIGKILL: the runner runs no cleanup of its own
        runner.wait()
        deadline = time.monotonic() + 30
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not group_alive(pgid), "a step of the killed runner is still running"
    finally:
        if runner.poll() is None:
            runner.kill()


def test_a_restart_stops_a_step_left_running_before_it_runs_it_again(tmp_path: Path):
    # a step whose runner died: the group's leader gone, its child adopted by init (not a child of this test, whose
    # zombie would keep the group "alive")
    spawn = subprocess.run(["setsid", "sh", "-c", "sleep 300 </dev/null >/dev/null 2>&1 & echo $$"],
                           capture_output=True, text=True, check=True)
    pgid = int(spawn.stdout.strip())
    (tmp_path / "running.json").write_text(json.dumps({"sft": pgid}))
    try:
        assert group_alive(pgid)
        assert stop_leftovers(tmp_path) == ["sft"]
        assert not group_alive(pgid)
        assert json.loads((tmp_path / "running.json").read_text()) == {}
    finally:
        if group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)


def test_a_second_runner_on_one_folder_is_refused(tmp_path: Path):
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom omnidecision.outputs import exclusive\n"
                               "with exclusive(sys.argv[1], 'plan folder'):\n    print('held', flush=True)\n"
                               "    time.sleep(60)", str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(typer.Exit) as refused:
            run_plan([Step("noop", ["version"], [], [])], tmp_path, jobs=1)
        assert "another process" in str(refused.value) and str(holder.pid) in str(refused.value)
        assert not (tmp_path / "stage_wall_s.json").exists()  # refused before any step ran
    finally:
        holder.kill()
