"""The plan on SLURM: every step one job, its `--dependency=afterok:` the jobs of the steps whose outputs it reads.

    omnidecision demo --out runs/demo --executor slurm [--sbatch-args "--partition=cpu --mem=8G"]
    omnidecision demo --out runs/demo --executor slurm --dry-run      # the sbatch lines, one a step; nothing submitted
    python -m omnidecision.pipeline.slurm_job OUT STEP                # a job's body (what each sbatch line runs)

The runner (the command above, on a login node) writes the plan to OUT/plan.json, submits the steps that are not
finished, waits for them and summarises as the local executor does. Each job runs its step through the local
runner's own `Runner.execute` (the same environment, thread count and records), then writes OUT/steps/STEP.json
(its wall time and record); the runner folds those into stage_wall_s.json and steps.json. A job asks
`--cpus-per-task` = the plan's threads.

Before it writes or submits anything the runner asks `sbatch --test-only` (`submit_problem`) whether the controller
would take the first job it submits (the partition, the resources asked, the account and limits there; every job
differs only in its name, log and dependencies): a refusal stops it with the controller's verdict, and the dry run
asks the same and stops in the same line. Nothing is submitted by the question. It also stops a job that sbatch
would take and that could never start (more CPUs a task than any node has: the job would stay PENDING for ever).

A restart (the same command again) keeps the finished steps, re-attaches to the jobs of the last submission that are
still pending or running (OUT/slurm_jobs.json), and submits only the rest. A step that fails cancels every step that
depends on it, and the runner stops naming the failed step, its log and the cancelled ones.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import typer

from omnidecision.outputs import write_json_atomic
from omnidecision.pipeline.plan import Step
from omnidecision.pipeline.restart import producers, read_state

ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"}


def job_line(step: Step, out: Path, threads: int, sbatch_args: list[str], after: list[str]) -> list[str]:
    """The sbatch command of one step (`after`: the job ids it waits for)."""
    line = ["sbatch", "--parsable", f"--job-name=od-{step.name}", f"--cpus-per-task={threads}", "--ntasks=1",
            f"--output={out / 'logs' / (step.name + '.slurm.out')}", *sbatch_args]
    if after:
        line.append(f"--dependency=afterok:{':'.join(after)}")
    body = [sys.executable, "-m", "omnidecision.pipeline.slurm_job", str(out), step.name]
    # exec: the job's body is the batch step's main process, not a child of sbatch's /bin/sh wrapper, which a
    # requeue's SIGTERM would end first (and a child whose parent ended is one SLURM's linuxproc tracking loses)
    return [*line, "--wrap", "exec " + shlex.join(body)]


NO_SBATCH = ("sbatch: not found on PATH; the slurm executor submits every step with it (run on a login node of the "
             "cluster, or use --executor local)")


def refused(step: str, stderr: str, sbatch_args: list[str] | None = None) -> str:
    """The run's one line when sbatch refuses the job of `step`, its dry run's too: the controller's verdict (the
    last line sbatch prints, without the prefix that differs between a submission, `sbatch: error: Batch job
    submission failed:`, and `--test-only`, `allocation failure:`) and what was asked."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()] or ["no reason given"]
    verdict = lines[-1]
    for prefix in ("sbatch: error:", "Batch job submission failed:", "allocation failure:"):
        verdict = verdict.removeprefix(prefix).strip()
    asked = f" (asked: {shlex.join(sbatch_args)})" if sbatch_args else ""
    return f"sbatch refused step {step!r}{asked}: {verdict}"


def submit_problem(plan: list[Step], out: Path, threads: int, sbatch_args: list[str],
                   kept: dict[str, float] | set[str], waiting: dict[str, tuple[str, str]]) -> str | None:
    """Why the run's first submission would be refused, asked of sbatch itself with `--test-only` (nothing is
    submitted): sbatch missing, or the controller refusing the job of the first step the run submits (a partition
    that does not exist, more CPUs or memory than a node has, an account or QOS limit); in the run's words. None when
    it would be taken or nothing is left to submit (every step kept or still queued from an earlier submission)."""
    todo = [s for s in plan if s.name not in kept and s.name not in waiting]
    if not todo:
        return None
    if shutil.which("sbatch") is None:
        return NO_SBATCH
    line = job_line(todo[0], out, threads, sbatch_args, [])
    res = subprocess.run([line[0], "--test-only", *line[1:]], capture_output=True, text=True)
    return refused(todo[0].name, res.stderr, sbatch_args) if res.returncode != 0 else None


def dry_run(plan: list[Step], out: Path, threads: int, sbatch_args: list[str],
            kept: dict[str, float] | None = None, waiting: dict[str, tuple[str, str]] | None = None) -> str:
    """The sbatch lines of the plan, each job's id in a shell variable its dependants name. As `run_plan_slurm`
    does: `kept` (restart.kept_steps) is not submitted and no job waits for it; `waiting` (`waiting_jobs`), a job of
    an earlier submission still queued or running, is not submitted again: its dependants wait for that job."""
    kept, waiting = kept or {}, waiting or {}
    deps = producers(plan)
    var = {s.name: "J_" + "".join(c if c.isalnum() else "_" for c in s.name) for s in plan}
    lines = ["#!/bin/bash", f"# the plan of {out} as SLURM jobs: `omnidecision ... --executor slurm` submits them",
             "# (after writing OUT/plan.json, which each job reads), waits, and keeps what finished for a restart",
             "set -e"]
    for step in plan:
        if step.name in kept:
            lines.append(f"# kept (finished in an earlier run, {kept[step.name]:.1f}s): {step.name}")
            continue
        if step.name in waiting:
            job, state = waiting[step.name]
            lines.append(f"{var[step.name]}={job}  # job of an earlier submission, {state}: waited for, not "
                         f"submitted again ({step.name})")
            continue
        words = [shlex.quote(w) for w in job_line(step, out, threads, sbatch_args, [])]
        after = [d for d in deps[step.name] if d not in kept]
        if after:
            words.insert(len(words) - 2, '"--dependency=afterok:' + ":".join("$" + var[d] for d in after) + '"')
        lines.append(f"{var[step.name]}=$({' '.join(words)})")
    return "\n".join(lines) + "\n"


def job_states(ids: list[str]) -> dict[str, str]:
    """job id → its state, as the controller reports it (finished jobs are kept MinJobAge seconds)."""
    if not ids:
        return {}
    # every job the controller holds (`show job` takes one id at a time), then these
    res = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True)
    states = {}
    for line in res.stdout.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields.get("JobId") in ids:
            states[fields["JobId"]] = fields.get("JobState", "UNKNOWN")
    return states


def dependants(plan: list[Step], failed: str) -> list[str]:
    """Every step that reads, directly or not, what `failed` writes."""
    deps = producers(plan)
    hit = {failed}
    for step in plan:
        if any(d in hit for d in deps[step.name]):
            hit.add(step.name)
    return [s.name for s in plan if s.name in hit and s.name != failed]


def waiting_jobs(plan: list[Step], out: Path, kept: dict[str, float] | set[str]) -> dict[str, tuple[str, str]]:
    """The unfinished steps whose job of an earlier submission (OUT/slurm_jobs.json) is still queued or running:
    step → (job id, state). A restart waits for them and submits them never twice; its dry run shows the same."""
    earlier = read_state(out / "slurm_jobs.json")
    alive = job_states([str(j) for j in earlier.values()])
    return {s.name: (str(job), alive[str(job)]) for s in plan if s.name not in kept
            and (job := earlier.get(s.name)) and alive.get(str(job)) in ACTIVE}


def run_plan_slurm(plan: list[Step], runner: Any, sbatch_args: list[str], done: set[str],
                   poll_s: float = 2.0) -> None:
    """Submit the unfinished steps of `plan`, wait for them, fold each job's record into `runner` (the local
    runner, scheduler.Runner: its folder `out`, its `threads` per step, its `times` and `records`) and call its
    `on_done()` (what saves them) after each. `done`: the steps a restart keeps."""
    out, threads, save = runner.out, runner.threads, runner.on_done
    waiting = waiting_jobs(plan, out, done)
    # asked before anything is written, as the dry run asks it
    if (problem := submit_problem(plan, out, threads, sbatch_args, done, waiting)) is not None:
        raise typer.Exit(problem)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "steps").mkdir(exist_ok=True)
    write_json_atomic(out / "plan.json", {"threads": threads, "steps": [dataclasses.asdict(s) for s in plan]})
    jobs_file = out / "slurm_jobs.json"
    earlier = read_state(jobs_file)
    deps = producers(plan)
    ids: dict[str, str] = {}
    for step in plan:
        if step.name in done:
            continue
        if step.name in waiting:
            job, state = waiting[step.name]
            ids[step.name] = job  # still queued or running from the last submission: wait for it, never twice
            print(f"=== [{step.name}] job {job} of an earlier submission is {state}: waiting for it", flush=True)
            continue
        (out / "steps" / f"{step.name}.json").unlink(missing_ok=True)
        after = [ids[d] for d in deps[step.name] if d in ids]
        res = subprocess.run(job_line(step, out, threads, sbatch_args, after), capture_output=True, text=True)
        if res.returncode != 0:
            raise typer.Exit(refused(step.name, res.stderr, sbatch_args))
        ids[step.name] = res.stdout.strip().split(";")[0]
        print(f"=== [{step.name}] submitted as job {ids[step.name]}" + (f" after {', '.join(after)}" if after else ""),
              flush=True)
        write_json_atomic(jobs_file, {**earlier, **ids})
    write_json_atomic(jobs_file, {**earlier, **ids})

    waiting = dict(ids)
    while waiting:
        states = job_states(list(waiting.values()))
        for name, job in list(waiting.items()):
            state = states.get(job, "UNKNOWN")
            if state == "COMPLETED":
                record = json.loads((out / "steps" / f"{name}.json").read_text("utf-8"))
                runner.times[name] = record["seconds"]
                runner.records[name] = record["record"]
                save()
                del waiting[name]
                print(f"=== [{name}] job {job} done in {record['seconds']:.1f}s", flush=True)
            elif state not in ACTIVE:
                cancelled = [d for d in dependants(plan, name) if d in waiting]
                if cancelled:
                    subprocess.run(["scancel", *[waiting[d] for d in cancelled]], capture_output=True)
                raise typer.Exit(f"step {name!r} (job {job}) ended {state}; see {out / 'logs' / (name + '.slurm.out')}"
                                 + (f"; cancelled what depends on it: {', '.join(cancelled)}" if cancelled else ""))
        if waiting:
            time.sleep(poll_s)
