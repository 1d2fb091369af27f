"""`omnidecision demo` and `omnidecision experiment`: the pipeline on a CPU, offline, from an imperfect teacher.

    omnidecision demo --out runs/demo              # = make demo (one start, a few RL replicates)
    omnidecision demo --out runs/demo-q --quick    # a smaller smoke run (tests use it)
    omnidecision demo --dry-run                    # the plan as a shell script (one command per line)
    omnidecision experiment --config configs/experiment/default.yaml --out runs/experiment   # = make experiment

The protocol, per start (arms.py has the table, plan.py the commands):
1. the teacher with habits (configs/collect/synthetic-habits.yaml: an API planner's systematic failures) collects
   train and dev; `harvest --label emitted` keeps the decisions it made in its judge-correct runs (no rule label);
2. a tiny planner, SFT on those rows (`sft`); `oracle_sft`, the named ceiling arm, the same SFT on rule-planner labels
   of every visited state (`harvest --label rule`), the only rule label in the demo;
3. the learned reward judge (`judge train`) and its AUROC against the closure checks on dev (`judge eval`);
4. GRPO from the SFT planner on the teacher's ledger states: `grpo` (closure checks), `grpo_judge` (checks + judge),
   `grpo_shuffled` (the judge's scores shuffled within each group: the placebo), each replicated with its RL seed;
   `grpo_own`: grpo_judge's recipe on the SFT planner's OWN states (`collect-own`: served on the train tasks, K
   samples at 0.7; `harvest-own --label none`: every run's states, no label), once per start, beside judge training;
5. the controls for the optimizer rows judge-train + grpo_judge consumed (same replicate): `sft_plus` (SFT further
   on the SFT data) and `rft` (best-of-K decisions by the same reward, fine-tuned); `rft_own`: rft on grpo_own's
   states, for judge-train + grpo_own (the experiment runs arms listed in its recipe's `single` once per start);
6. every planner served by vLLM in the loop on the test suite; `teacher` and `rule` as reference rows.
Writes OUT/summary.json, OUT/summary.md, OUT/steps.json, OUT/compare/, OUT/view/ and each evaluation's report.
"""

from __future__ import annotations

import hashlib
import logging
import shlex
from pathlib import Path

import typer

from omnidecision.outputs import report_out
from omnidecision.pipeline.curve import run_cells, write_curve
from omnidecision.pipeline.experiment import experiment_table, load_experiment, pool, write_result
from omnidecision.pipeline.merge import MergeError, merge_results, read_result
from omnidecision.pipeline.plan import DemoConfig, build_plan, needed
from omnidecision.pipeline.scheduler import dry_run as plan_dry_run
from omnidecision.pipeline.scheduler import run_plan
from omnidecision.pipeline.summary import summarise, table
from omnidecision.provenance import git_revision

logger = logging.getLogger(__name__)

JOBS_HELP = "independent steps of one group run this many at a time, one job slot per core (1: one after another)"
THREADS_HELP = "threads of every step, whatever runs beside it (fixed, so a rerun reproduces the numbers)"
EXECUTOR_HELP = ("where the steps run: local (processes on this machine) or slurm (one job a step, its afterok "
                 "dependencies the steps it reads from; --dry-run prints the sbatch lines)")
SBATCH_HELP = "options every step's sbatch line gets, e.g. '--partition=cpu --mem=8G --time=04:00:00'"


def check_executor(executor: str) -> None:
    if executor not in ("local", "slurm"):
        raise typer.BadParameter(f"{executor!r}: local or slurm", param_hint="--executor")


def demo(
    out: Path = typer.Option(Path("runs/demo"), help="output folder (everything the demo makes goes here)"),
    quick: bool = typer.Option(False, help="a small smoke run instead of the embedded default"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan as a shell script and stop"),
    seed: int = typer.Option(0, help="seed of the suites, the teacher's draws and SFT (the start)"),
    test_tasks: int | None = typer.Option(None, help="test suite size (default 40; quick 8)"),
    sft_steps: int | None = typer.Option(None, help="override the SFT step budget"),
    grpo_steps: int | None = typer.Option(None, help="override the GRPO steps"),
    replicates: int | None = typer.Option(None, min=1, help="RL replicates per post-SFT arm (default 1; quick 1)"),
    jobs: int = typer.Option(2, min=1, help=JOBS_HELP),
    threads: int = typer.Option(1, min=1, help=THREADS_HELP),
    only: list[str] = typer.Option([], help="run only these steps and what they need (no summary), e.g. eval-rule"),
    executor: str = typer.Option("local", help=EXECUTOR_HELP),
    sbatch_args: str = typer.Option("", "--sbatch-args", help=SBATCH_HELP),
) -> None:
    """synth → collect (teacher with habits) → harvest → SFT → judge → GRPO arms → controls → eval, on CPU, offline."""
    cfg = DemoConfig.quick() if quick else DemoConfig()
    cfg.seed, cfg.threads = seed, threads
    cfg.test_tasks = test_tasks or cfg.test_tasks
    cfg.sft_steps = sft_steps or cfg.sft_steps
    cfg.grpo_steps = grpo_steps or cfg.grpo_steps
    cfg.replicates = replicates or cfg.replicates
    check_executor(executor)
    out = out.resolve()
    plan = build_plan(cfg, out)
    if only:
        plan = needed(plan, only)
    if dry_run:  # what a run in `out` would do now, and the refusal it would stop with (in its words)
        text, refusal = plan_dry_run(plan, out, threads, executor, shlex.split(sbatch_args))
        print(text, end="", file=report_out())
        if refusal is not None:
            raise typer.Exit(refusal)
        return
    times = run_plan(plan, out, jobs, threads, executor, shlex.split(sbatch_args))
    if only:
        return
    summary = summarise(out, cfg, times)
    text = table(summary) + ("\nEvery test-suite run of every planner, step by step (offline HTML): "
                             "[view/index.html](view/index.html)\n")
    (out / "summary.md").write_text("# omnidecision demo\n\n" + text, "utf-8")
    print("\n" + text)
    print(f"summary: {out / 'summary.json'}; reports and plots under {out / 'eval'}/*/")


def experiment(
    config: Path = typer.Option(Path(__file__).resolve().parents[2] / "configs" / "experiment" / "default.yaml",
                                help="the experiment recipe (starts, replicates, sizes, planned contrasts)"),
    out: Path = typer.Option(Path("runs/experiment"), help="one folder per start goes under it"),
    starts: str | None = typer.Option(None, "--starts", help="comma-separated starts (overrides the "
                                                                      "recipe's)"),
    teacher_tasks: str | None = typer.Option(None, "--teacher-tasks", help="comma-separated N values of a teacher-"
                                             "data curve to run now (overrides the recipe's; finished cells are "
                                             "kept: rerun with the recipe's list to pool them all)"),
    replicates: int | None = typer.Option(None, min=1, help="RL replicates per start (overrides the recipe's)"),
    test_tasks: int | None = typer.Option(None, help="test suite size per start (overrides the recipe's)"),
    sft_steps: int | None = typer.Option(None, help="SFT steps per start (overrides the recipe's)"),
    judge_steps: int | None = typer.Option(None, help="reward-judge training steps (overrides the recipe's)"),
    results: Path | None = typer.Option(None, help="also write the pooled result here (e.g. "
                                                   "docs/results/experiment.json)"),
    pool_with: list[Path] = typer.Option([], "--pool-with", help="earlier experiment result files whose starts "
                                         "are pooled with this run's (same recipe but for `starts`; "
                                         "pipeline/merge.py)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print every start's plan as a shell script and stop"),
    jobs: int = typer.Option(2, min=1, help=JOBS_HELP),
    executor: str = typer.Option("local", help=EXECUTOR_HELP),
    sbatch_args: str = typer.Option("", "--sbatch-args", help=SBATCH_HELP),
) -> None:
    """The protocol over several starts with RL replicates, pooled; the recipe's planned contrasts first."""
    overrides = [f"{k}={v}" for k, v in (("replicates", replicates), ("test_tasks", test_tasks),
                                         ("sft_steps", sft_steps), ("judge_steps", judge_steps)) if v is not None]
    if starts is not None:
        overrides.append(f"starts=[{starts}]")
    if teacher_tasks is not None:
        overrides.append(f"teacher_tasks=[{teacher_tasks}]")
    try:
        recipe = load_experiment(config, overrides)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    if recipe.teacher_tasks and pool_with:
        raise typer.BadParameter("a teacher-data curve pools its own cells; --pool-with is for the plain experiment",
                                 param_hint="--pool-with")
    try:  # read before anything runs: a file that cannot be pooled should not cost a start's hours
        # named with the file's digest: the file at that path is overwritten when it is also --results
        earlier = [(f"{p} (sha256 {hashlib.sha256(p.read_bytes()).hexdigest()[:16]})", res)
                   for p, res in ((p, read_result(p)) for p in pool_with)]
    except MergeError as exc:
        raise typer.BadParameter(str(exc), param_hint="--pool-with") from exc
    check_executor(executor)
    # one demo folder per (N, start); finished ones are kept
    cells = run_cells(recipe, out, jobs, dry_run, executor, shlex.split(sbatch_args))
    if dry_run:
        return
    out.mkdir(parents=True, exist_ok=True)
    if recipe.teacher_tasks:  # the curve: each N pooled apart, the teacher priced, the declared headline read
        print(write_curve(recipe, cells, out, results))
        return
    summaries, folders = [s for s, _ in cells[None]], [f for _, f in cells[None]]
    pooled = pool(summaries, folders, recipe, plot=None if earlier else out / "contrasts.png")
    pooled["test_tasks_per_seed"] = recipe.test_tasks
    pooled["git_revision"] = git_revision()
    if earlier:
        try:
            pooled = merge_results([*earlier, (f"this run ({out})", pooled)], recipe, plot=out / "contrasts.png")
        except MergeError as exc:  # this run's starts are kept in OUT; only the pooling is refused
            raise typer.BadParameter(str(exc), param_hint="--pool-with") from exc
    write_result(pooled, out, results)
    print(experiment_table(pooled))
