"""A restart's dry run says what the restart does (fast: nothing trains): the steps a run in the same folder keeps are
comments in the demo's script and absent from its SLURM script (no job waits for them), a finished experiment cell is
named kept, and a cell another process is running is named with its holder, as the run would refuse it.

    .venv/bin/pytest -q tests/demo/test_restart_dry_run.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer

from omnidecision.pipeline.curve import cell_folder
from omnidecision.pipeline.experiment import load_experiment
from omnidecision.pipeline.plan import DemoConfig, build_plan
from omnidecision.pipeline.restart import finished_cell
from omnidecision.pipeline.scheduler import dry_run as plan_dry_run
from omnidecision.pipeline.scheduler import kept_steps, run_plan
from omnidecision.pipeline.slurm import NO_SBATCH
from omnidecision.pipeline.slurm import dry_run as slurm_script

from .test_demo_plan import script_commands

ROOT = Path(__file__).resolve().parents[2]
CURVE = ROOT / "configs" / "experiment" / "teacher-curve.yaml"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omnidecision.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def _plant(out: Path) -> tuple[str, str, str]:
    """Two synth steps recorded as finished: the first with its outputs there (kept), the second with them gone (it
    runs again); and a step that reads the kept one's output. Returns their names."""
    plan = build_plan(DemoConfig.quick(), out.resolve())
    synth = [s for s in plan if s.argv[:2] == ["tasks", "synth"]]
    kept, gone = synth[0], synth[1]
    reader = next(s for s in plan if any(str(w) in s.argv for w in kept.writes) and s is not kept)
    for w in kept.writes:
        Path(w).mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stage_wall_s.json").write_text(json.dumps({kept.name: 1.5, gone.name: 0.7}))
    return kept.name, gone.name, reader.name


def test_the_demo_dry_run_comments_out_what_the_restart_keeps_and_the_run_keeps_the_same(tmp_path):
    out = tmp_path / "demo"
    kept, gone, _ = _plant(out)
    plan = build_plan(DemoConfig.quick(), out.resolve())
    assert kept_steps(plan, out.resolve()) == {kept: 1.5}
    proc = cli("demo", "--quick", "--dry-run", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    commands = {" ".join(c) for c in script_commands(proc.stdout)}
    argv = {s.name: " ".join(["omnidecision", *s.argv]) for s in plan}
    assert argv[kept] not in commands and argv[gone] in commands
    assert len(commands) == len(plan) - 1
    marks = [line for line in proc.stdout.splitlines() if line.startswith("# kept")]
    assert len(marks) == 1 and marks[0].startswith("# kept (finished in an earlier run, 1.5s): omnidecision tasks")
    # the run in the same folder keeps that step and runs the other (each alone, with --only)
    run = cli("demo", "--quick", "--out", str(out), "--only", kept)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"=== [{kept}] finished in an earlier run (1.5s): kept" in run.stdout
    assert f"=== [{kept}] omnidecision" not in run.stdout


def test_the_slurm_dry_run_submits_no_kept_step_and_no_job_waits_for_one(tmp_path):
    out = (tmp_path / "demo").resolve()
    kept, gone, reader = _plant(out)
    plan = build_plan(DemoConfig.quick(), out)
    text = slurm_script(plan, out, 1, [], kept_steps(plan, out))
    var = "J_" + "".join(c if c.isalnum() else "_" for c in kept)
    assert f"--job-name=od-{kept} " not in text and f"# kept (finished in an earlier run, 1.5s): {kept}" in text
    assert f"--job-name=od-{gone} " in text
    reader_line = next(line for line in text.splitlines() if f"--job-name=od-{reader} " in line)
    assert f"${var}" not in reader_line  # it reads what is there already
    # without the restart's state, the same step is submitted and its reader waits for it
    fresh = slurm_script(plan, out, 1, [])
    assert f"--job-name=od-{kept} " in fresh
    assert f"${var}" in next(line for line in fresh.splitlines() if f"--job-name=od-{reader} " in line)


def test_without_sbatch_the_slurm_dry_run_and_the_run_stop_in_one_line(tmp_path, monkeypatch):
    """A login node without SLURM's client: the run stops before it writes anything, and its dry run, which still
    shows the script, stops in the same line (the SLURM tests hold the controller's own refusals the same way)."""
    out = (tmp_path / "demo").resolve()
    plan = build_plan(DemoConfig.quick(), out)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no sbatch there
    text, refusal = plan_dry_run(plan, out, 1, "slurm", ["--mem=1G"])
    assert refusal == NO_SBATCH and "sbatch --parsable" in text
    with pytest.raises(typer.Exit) as stopped:
        run_plan(plan, out, jobs=1, threads=1, executor="slurm", sbatch_args=["--mem=1G"])
    assert str(stopped.value) == refusal
    assert not any((out / name).exists() for name in ("plan.json", "slurm_jobs.json", "logs", "steps"))
    # the local executor needs no sbatch: its dry run is not refused
    assert plan_dry_run(plan, out, 1, "local", [])[1] is None

def _hold(folder: Path) -> subprocess.Popen:
    """Another process holding `folder`'s runner lock, as a run in it would (returns once it holds it)."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom omnidecision.outputs import exclusive\n"
         f"with exclusive({str(folder)!r}, 'plan folder'):\n    print('held', flush=True)\n    time.sleep(120)"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_the_experiment_dry_run_names_finished_cells_and_stops_at_a_cell_another_process_runs(tmp_path):
    recipe = load_experiment(CURVE)
    (n0, s0), (n1, s1) = list(recipe.cells())[:2]
    out = tmp_path / "curve"
    done = cell_folder(out, n0, s0)
    done.mkdir(parents=True)
    (done / "summary.json").write_text("{}")
    # every step of its plan recorded finished (its files need not be there: kept whole)
    plan = build_plan(recipe.start_config(s0, n0), done.resolve(), recipe.arm_table())
    (done / "stage_wall_s.json").write_text(json.dumps({s.name: 1.0 for s in plan}))
    holder = _hold(cell_folder(out, n1, s1).resolve())
    try:
        proc = cli("experiment", "--config", str(CURVE), "--out", str(out), "--dry-run")
    finally:
        holder.kill()
        holder.wait()
    lines = proc.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(f"# cell: teacher_tasks={n0}, start={s0}"))
    assert lines[first].endswith(": kept, nothing runs") and not lines[first + 1].startswith("#!")
    second = next(i for i, line in enumerate(lines) if line.startswith(f"# cell: teacher_tasks={n1}, start={s1}"))
    assert lines[second + 1].startswith("# refused now: ") and f"pid {holder.pid}," in lines[second + 1]
    # every cell is still printed, and the dry run exits as the run would, with its refusal
    assert len([line for line in lines if line.startswith("# cell: ")]) == len(list(recipe.cells()))
    assert proc.returncode != 0 and lines[second + 1].removeprefix("# refused now: ") in proc.stderr
    # with the holder gone the same dry run names no refusal
    again = cli("experiment", "--config", str(CURVE), "--out", str(out), "--dry-run")
    assert again.returncode == 0 and "refused now" not in again.stdout


def test_a_cell_summarised_under_a_smaller_plan_is_not_kept_whole(tmp_path):
    """An arm or a replicate added to the recipe since a cell was summarised: the cell is not finished for the plan
    it runs now, so its new steps run (the recorded ones are kept by the step restart) and it is summarised again."""
    recipe = load_experiment(CURVE)
    n, start = next(iter(recipe.cells()))
    folder = cell_folder(tmp_path / "curve", n, start).resolve()
    plan = build_plan(recipe.start_config(start, n), folder, recipe.arm_table())
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text("{}")
    (folder / "stage_wall_s.json").write_text(json.dumps({s.name: 1.0 for s in plan[:-1]}))  # the last one is new
    assert not finished_cell(plan, folder) and not finished_cell(plan, tmp_path / "nothing")
    proc = cli("experiment", "--config", str(CURVE), "--out", str(tmp_path / "curve"), "--dry-run")
    lines = proc.stdout.splitlines()
    i = next(i for i, x in enumerate(lines) if x.startswith(f"# cell: teacher_tasks={n}, start={start}"))
    assert "kept, nothing runs" not in lines[i] and lines[i + 1].startswith("#!"), lines[i:i + 2]  # its plan runs
    (folder / "stage_wall_s.json").write_text(json.dumps({s.name: 1.0 for s in plan}))
    assert finished_cell(plan, folder)

def test_the_demo_dry_run_is_refused_in_the_runs_words_while_another_runner_holds_the_folder(tmp_path):
    out = (tmp_path / "demo").resolve()
    kept, _, _ = _plant(out)
    holder = _hold(out)
    try:
        dry = cli("demo", "--quick", "--dry-run", "--out", str(out))
        run = cli("demo", "--quick", "--out", str(out), "--only", kept)
    finally:
        holder.kill()
        holder.wait()
    assert dry.returncode != 0 and run.returncode != 0
    refusal = [line for line in run.stderr.splitlines() if "another process is writing this plan folder" in line]
    assert refusal and f"pid {holder.pid}," in refusal[0]
    assert refusal[0] in dry.stderr.splitlines()
    assert "omnidecision tasks synth" in dry.stdout  # the script is still shown


def test_a_damaged_state_file_stops_the_dry_run_as_it_stops_the_run(tmp_path):
    out = (tmp_path / "demo").resolve()
    kept, _, _ = _plant(out)
    (out / "steps.json").write_text("{not json")
    dry = cli("demo", "--quick", "--dry-run", "--out", str(out))
    run = cli("demo", "--quick", "--out", str(out), "--only", kept)
    assert dry.returncode != 0 and run.returncode != 0
    said = [line for line in run.stderr.splitlines() if "steps.json: not a readable state file" in line]
    assert said and said[0] in dry.stderr.splitlines()


def _orphan() -> tuple[int, int]:
    """A process a killed runner left behind: its own process group, parented by init (not by this test, which would
    keep it a zombie after it is stopped). Returns (pid, process group)."""
    shell = subprocess.run(["setsid", "bash", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], capture_output=True,
                           text=True, check=True)
    pid = int(shell.stdout.strip())
    return pid, os.getpgid(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_dry_run_names_a_step_a_killed_runner_left_running_and_the_run_stops_it(tmp_path):
    out = (tmp_path / "demo").resolve()
    kept, gone, _ = _plant(out)
    pid, pgid = _orphan()
    try:
        (out / "running.json").write_text(json.dumps({gone: pgid}))
        dry = cli("demo", "--quick", "--dry-run", "--out", str(out))
        assert dry.returncode == 0, dry.stderr[-2000:]
        assert f"# a killed runner left step {gone} running (process group {pgid})" in dry.stdout
        assert _alive(pid)  # the dry run stopped nothing
        run = cli("demo", "--quick", "--out", str(out), "--only", gone)
        assert run.returncode == 0, run.stderr[-2000:]
        assert f"=== [{gone}] was still running from a killed run: stopped before it runs again" in run.stdout
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid)
    finally:
        if _alive(pid):
            os.killpg(pgid, 9)
    again = cli("demo", "--quick", "--dry-run", "--out", str(out))
    assert "a killed runner left" not in again.stdout
