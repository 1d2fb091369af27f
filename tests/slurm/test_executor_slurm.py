"""The plan executor on SLURM (`--executor slurm`, omnidecision/pipeline/slurm.py) against the local one, on a plan
of the project's own commands: two task suites, a collection of each, a harvest reading both. Every step a job
whose `afterok` dependencies are the steps it reads from; the same outputs as the local executor; a restart submits
nothing finished, and its dry run shows a job of the last submission still queued as waited for, not submitted
again; a failed step cancels its dependants and the runner names them.

    make slurm-test     # or: .venv/bin/pytest -q -m slurm tests/slurm/test_executor_slurm.py
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import typer

from omnidecision.pipeline.plan import Step
from omnidecision.pipeline.scheduler import dry_run as plan_dry_run
from omnidecision.pipeline.scheduler import run_plan
from omnidecision.pipeline.slurm import dry_run, job_line, producers, refused, waiting_jobs
from tests.slurm.conftest import Cluster

pytestmark = pytest.mark.slurm

RECIPE = "configs/collect/synthetic-teacher.yaml"


def plan_of(out: Path, bad_tasks: bool = False) -> list[Step]:
    a, b = out / "tasks-a", out / "tasks-b"
    col_a, col_b, harvest = out / "col-a", out / "col-b", out / "harvest"
    tasks_b = out / "no-such-tasks" if bad_tasks else b
    return [
        Step("synth-a", ["tasks", "synth", "--n", "12", "--seed", "0", "--out", str(a)], [], [str(a)]),
        Step("synth-b", ["tasks", "synth", "--n", "12", "--seed", "1", "--out", str(b)], [], [str(b)]),
        Step("collect-a", ["collect", "--config", RECIPE, "--tasks.path", str(a), "--out", str(col_a),
                           "--no-progress"], [str(a)], [str(col_a)]),
        Step("collect-b", ["collect", "--config", RECIPE, "--tasks.path", str(tasks_b), "--out", str(col_b),
                           "--no-progress"], [str(b)], [str(col_b)]),
        Step("harvest", ["harvest", str(col_a), str(col_b), "--out", str(harvest), "--advancing-only", "--dedup"],
             [str(col_a), str(col_b)], [str(harvest)]),
    ]


def records(folder: Path) -> dict[tuple[str, int], tuple[str, str | None]]:
    return {(r["task_id"], r["sample"]): (r["outcome"], r["answer"])
            for f in sorted(folder.glob("trajectories*.jsonl")) for r in map(json.loads, f.open())}


@pytest.fixture
def on_cluster(slurm_cluster: Cluster, monkeypatch) -> Cluster:
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    return slurm_cluster


def test_every_step_a_job_after_the_steps_it_reads(tmp_path: Path):
    plan = plan_of(tmp_path)
    assert producers(plan) == {"synth-a": [], "synth-b": [], "collect-a": ["synth-a"], "collect-b": ["synth-b"],
                               "harvest": ["collect-a", "collect-b"]}
    text = dry_run(plan, tmp_path, 1, ["--mem=1G"])
    assert text.count("sbatch --parsable") == 5 and '"--dependency=afterok:$J_collect_a:$J_collect_b"' in text


def test_the_plan_on_slurm_equals_the_local_executor_and_a_restart_submits_nothing(on_cluster: Cluster,
                                                                                   tmp_path: Path, capsys):
    on_slurm, here = tmp_path / "slurm", tmp_path / "local"
    times = run_plan(plan_of(on_slurm), on_slurm, jobs=1, threads=1, executor="slurm", sbatch_args=["--mem=1G"])
    assert set(times) >= {s.name for s in plan_of(on_slurm)}
    jobs = json.loads((on_slurm / "slurm_jobs.json").read_text())
    nodes = {on_cluster.jobs(j)[0]["NodeList"] for j in jobs.values()}
    assert nodes <= {"n1", "n2"}
    run_plan(plan_of(here), here, jobs=1, threads=1)
    for col in ("col-a", "col-b"):
        assert records(on_slurm / col) == records(here / col) and records(here / col)
    stats = [json.loads((d / "harvest" / "stats.json").read_text()) for d in (on_slurm, here)]
    assert [{k: v for k, v in s.items() if k != "sources"} for s in stats][0] == \
        {k: v for k, v in stats[1].items() if k != "sources"}  # the same rows; only the folders' names differ
    steps = json.loads((on_slurm / "steps.json").read_text())["steps"]
    assert set(steps) == set(times) and all(r["threads"] == 1 for r in steps.values())

    capsys.readouterr()
    run_plan(plan_of(on_slurm), on_slurm, jobs=1, threads=1, executor="slurm")
    again = capsys.readouterr().out
    assert "submitted" not in again and again.count("finished in an earlier run") == 5
    assert json.loads((on_slurm / "slurm_jobs.json").read_text()) == jobs  # nothing new submitted


def test_a_failed_step_cancels_what_depends_on_it(on_cluster: Cluster, tmp_path: Path):
    out = tmp_path / "fail"
    with pytest.raises(typer.Exit) as stopped:
        run_plan(plan_of(out, bad_tasks=True), out, jobs=1, threads=1, executor="slurm", sbatch_args=["--mem=1G"])
    message = str(stopped.value)
    assert "'collect-b'" in message and "FAILED" in message and "harvest" in message
    jobs = json.loads((out / "slurm_jobs.json").read_text())
    assert on_cluster.jobs(jobs["harvest"])[0]["JobState"] == "CANCELLED"
    assert not (out / "harvest").exists()


def test_a_restart_dry_run_waits_for_a_queued_job_of_the_last_submission(on_cluster: Cluster, tmp_path: Path):
    out = tmp_path / "wait"
    out.mkdir()
    plan = plan_of(out)
    held = subprocess.run(["sbatch", "--parsable", "--hold", "--mem=1G", "--job-name=od-held", "--wrap", "sleep 1"],
                          capture_output=True, text=True, check=True)  # queued, never started: PENDING
    job = held.stdout.strip().split(";")[0]
    try:
        (out / "slurm_jobs.json").write_text(json.dumps({"synth-a": job}))
        assert waiting_jobs(plan, out, {}) == {"synth-a": (job, "PENDING")}  # what the run waits for
        text, refusal = plan_dry_run(plan, out, 1, "slurm", ["--mem=1G"])
        assert refusal is None
        assert f"J_synth_a={job}  # job of an earlier submission, PENDING" in text
        assert "--job-name=od-synth-a " not in text and "--job-name=od-synth-b " in text
        collect_a = next(line for line in text.splitlines() if "--job-name=od-collect-a " in line)
        assert "$J_synth_a" in collect_a  # it waits for that job, as the run's submission would
    finally:
        subprocess.run(["scancel", job], capture_output=True)
    # once that job is gone the dry run submits the step again
    assert waiting_jobs(plan, out, {}) == {}


@pytest.mark.parametrize(("args", "threads", "words", "submitted"), [
    (["--mem=1G", "--partition=nosuch"], 1, "Invalid partition name specified", False),
    (["--mem=999999G"], 1, "Requested node configuration is not available", False),
    # sbatch takes this job, which no node could start: it would stay PENDING for ever
    (["--mem=1G"], 4096, "Requested node configuration is not available", True)])
def test_a_job_the_controller_refuses_is_refused_by_the_dry_run_and_the_run_alike(on_cluster: Cluster,
                                                                                  tmp_path: Path, args, threads,
                                                                                  words, submitted):
    """The dry run asks the controller (`sbatch --test-only`) what the run's first submission would be told: a
    partition that does not exist, more memory or CPUs than a node has. Both stop in the same line, nothing written
    and nothing submitted."""
    out = tmp_path / "refused"
    plan = plan_of(out)
    queued = on_cluster.run("squeue", "-h", "-o", "%i").stdout.split()
    text, refusal = plan_dry_run(plan, out, threads, "slurm", args)
    assert text.count("sbatch --parsable") == 5  # the script is still shown
    assert refusal == f"sbatch refused step 'synth-a' (asked: {' '.join(args)}): {words}", refusal
    with pytest.raises(typer.Exit) as stopped:
        run_plan(plan, out, jobs=1, threads=threads, executor="slurm", sbatch_args=args)
    assert str(stopped.value) == refusal
    assert not any((out / name).exists() for name in ("plan.json", "slurm_jobs.json", "logs", "steps"))
    # neither submitted a job: no id the queue did not hold before (a job of an earlier test may leave the queue
    # meanwhile, so the two lists need not be equal)
    assert set(on_cluster.run("squeue", "-h", "-o", "%i").stdout.split()) <= set(queued)
    # what the question spares: the job itself, submitted for real, is refused in the same verdict, or taken
    # to wait for ever
    real = on_cluster.run(*job_line(plan[0], out, threads, args, []), check=False)
    if real.returncode == 0:
        job = real.stdout.strip().split(";")[0]
        state = on_cluster.states(job)
        on_cluster.run("scancel", job, check=False)
        assert submitted and state == ["PENDING"], state
    else:
        assert not submitted and refused("synth-a", real.stderr, args) == refusal, real
