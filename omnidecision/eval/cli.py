"""Eval commands mounted by `omnidecision/cli.py`: `serve`, `eval`, `compare`, `ablate`, `audit progress`.

    omnidecision serve runs/export/merged --port 8000
    omnidecision serve Qwen/Qwen3-8B --lora planner=runs/sft/adapter --tensor-parallel-size 2
    omnidecision serve Qwen/Qwen3-8B --lora planner=runs/sft/adapter --dry-run   # the vLLM command; start nothing
    omnidecision eval --config configs/eval/synthetic-tiny-vllm.yaml --samples 2 --out runs/eval-a
    omnidecision compare runs/eval-a runs/eval-b --out runs/compare
    omnidecision ablate --config configs/eval/synthetic-tiny-vllm.yaml --max-tool-calls 6 --out runs/ablate
    omnidecision ablate --grid configs/ablate/synthetic-grid.yaml --tasks.path runs/synth-eval --out runs/grid
    omnidecision audit progress runs/eval-a --scorer string --out runs/eval-a/progress

`eval` and `ablate` override any recipe field as `--key.path VALUE` (e.g. `--agent.step_budget 10`), the syntax of
`sft`, `grpo` and `collect` too. Every command takes `--dry-run`: resolve, check, print, start nothing, write nothing.
`eval` retries runs recorded with outcome `error` on a restart (`--no-retry-errors` keeps them), and stops with
exit code 3 naming an endpoint that stays unreachable (the recipe's `breaker:` block).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer

from omnidecision.eval.checklist import prepare_eval
from omnidecision.eval.compare import MODES, load_report, run_ablation, write_compare
from omnidecision.eval.dryrun import dry_run_report, eval_dry_run
from omnidecision.eval.grid import grid_dry_run, run_grid
from omnidecision.eval.progress import LLMScorer, ScorerEndpoint, StringScorer, audit
from omnidecision.eval.progress_report import load_runs, recipe_tasks, write_audit
from omnidecision.eval.runner import run_prepared
from omnidecision.eval.serve import serve_report
from omnidecision.options import ReplaceOption
from omnidecision.outputs import output_problems, staged_output
from omnidecision.preflight import Check, DryRunReport, PreflightError, check_url, emit, require
from omnidecision.rollout.breaker import RolloutsStopped
from omnidecision.rollout.recipe import EvalRecipe, RecipeError, cli_overrides, load_recipe
from omnidecision.serving.vllm_server import VLLMServer, VLLMServerError
from omnidecision.tasks.loaders import load_tasks

logger = logging.getLogger(__name__)


def _logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")


@contextlib.contextmanager
def _exit_codes():
    """A run's failures as exit codes with the message: 2 for bad input (recipe, files), 3 when an endpoint stayed
    down (rollout/breaker.py: the message names it)."""
    try:
        yield
    except (RecipeError, ValueError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except RolloutsStopped as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(3) from exc


def _lora_modules(lora: list[str], dry_run: bool) -> dict[str, str]:
    """`--lora NAME=DIR` items as {NAME: DIR}; a malformed item, or (for a real start) a missing folder, is exit 2."""
    loras = {}
    for item in lora:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            typer.echo(f"error: --lora {item!r}: expected NAME=DIR", err=True)
            raise typer.Exit(2)
        if not dry_run and not Path(path).is_dir():
            typer.echo(f"error: --lora {item!r}: {path} is not a folder", err=True)
            raise typer.Exit(2)
        loras[name] = path
    return loras


def serve(
    model: str = typer.Argument(..., help="merged checkpoint folder (or the base model when serving adapters)"),
    lora: list[str] = typer.Option([], "--lora", help="NAME=DIR: serve a LoRA adapter under NAME (repeatable)"),
    port: int = typer.Option(8000, help="port"),
    host: str = typer.Option("127.0.0.1", help="interface to bind: 127.0.0.1 answers this machine only; 0.0.0.0 "
                                               "lets other machines (another node, a client) connect"),
    tensor_parallel_size: Optional[int] = typer.Option(None, help="GPUs per model (vLLM on GPUs)"),  # noqa: UP045
    max_model_len: int = typer.Option(4096, help="context length in tokens (vLLM's --max-model-len): 4096 holds a "
                                                 "planner digest and its decision; raise it for longer prompts"),
    max_lora_rank: Optional[int] = typer.Option(  # noqa: UP045
        None, help="--max-lora-rank of vLLM (default: the adapters' largest rank, from adapter_config.json)"),
    served_name: Optional[str] = typer.Option(None, help="name clients request (default: folder name)"),  # noqa: UP045
    startup_timeout: float = typer.Option(900.0, help="seconds to wait until /v1/models answers (an 8B cold start "
                                                      "takes minutes)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="check the model and adapters, print the vLLM command and "
                                                          "its environment, start nothing"),
    fresh_cache: bool = typer.Option(False, "--fresh-cache", help="a private vLLM compile cache, deleted on stop "
                                     "(default: the persistent one, $VLLM_CACHE_ROOT or ~/.cache/omnidecision/vllm)"),
    limit_mm_per_prompt: Optional[str] = typer.Option(  # noqa: UP045
        None, help='a perception model: media items per request, as JSON (e.g. \'{"image": 16, "audio": 2}\')'),
    vllm_args: Optional[str] = typer.Option(  # noqa: UP045
        None, "--vllm-args", help="any other `vllm serve` arguments, one quoted string passed verbatim (e.g. "
        "'--gpu-memory-utilization 0.85 --max-num-seqs 256'; an eval recipe's serve.extra_args); --dry-run checks "
        "them with vLLM's parser"),
) -> None:
    """Serve a planner or a multimodal perception model (a local folder or a hub id such as Qwen/Qwen3-8B) with
    vLLM's OpenAI-compatible server until Ctrl-C / SIGTERM (private temp dir, persistent compile cache)."""
    _logging()
    loras = _lora_modules(lora, dry_run)
    extra = ["--tensor-parallel-size", str(tensor_parallel_size)] if tensor_parallel_size else []
    if limit_mm_per_prompt:
        try:
            json.loads(limit_mm_per_prompt)
        except ValueError as exc:
            typer.echo(f"error: --limit-mm-per-prompt {limit_mm_per_prompt!r}: not JSON ({exc})", err=True)
            raise typer.Exit(2) from None
        extra += ["--limit-mm-per-prompt", limit_mm_per_prompt]
    extra += shlex.split(vllm_args or "")
    server = VLLMServer(model, port=port, lora_modules=loras, extra_args=extra, served_name=served_name,
                        max_model_len=max_model_len, max_lora_rank=max_lora_rank, host=host,
                        startup_timeout_s=startup_timeout, fresh_cache=fresh_cache)
    if dry_run:
        report = DryRunReport(command="serve", resolved={"model": model, "loras": loras, "host": host, "port": port})
        serve_report(report, server)
        raise typer.Exit(emit(report))

    def on_term(signum, frame):  # SIGTERM: leave through the same clean path as Ctrl-C
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        with server:
            names = [server.served_name, *loras]
            typer.echo(f"serving {', '.join(names)} at {server.base_url} (Ctrl-C to stop)")
            typer.echo(f"  OPENAI_BASE_URL={server.base_url}  model={names[-1]}")
            while server.proc is not None and server.proc.poll() is None:
                time.sleep(0.5)
            if server.proc is not None:
                typer.echo(f"error: vLLM exited with code {server.proc.returncode}:\n{server.log_tail()}", err=True)
                raise typer.Exit(1)
    except KeyboardInterrupt:
        typer.echo("stopping vLLM")
    except VLLMServerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    finally:
        signal.signal(signal.SIGTERM, previous)


def _recipe(config: Path, extra: list[str], out: Path | None, dry_run: str | None = None):
    """The eval recipe with the command line's overrides. A bad recipe exits 2 naming the file and field; in a dry
    run (`dry_run` = the command's name) it prints the report first, one failed check per unset variable."""
    try:
        # `--no-retry-errors`, as in `collect`: earlier `error` runs count as finished
        overrides = cli_overrides(["--retry_errors=false" if a == "--no-retry-errors" else a for a in extra])
        if out is not None:
            overrides.append(f"out={out}")
        return load_recipe(config, overrides, model=EvalRecipe)
    except (RecipeError, ValueError) as exc:
        if dry_run is not None:
            report = DryRunReport(command=dry_run, recipe=str(config))
            # an unset-variables error lists every variable ("FILE: field: ... VAR ...; field: ..."): one check each
            head, sep, rest = str(exc).partition(": ")
            items = rest.split("; ") if sep and "environment variable" in rest else [str(exc)]
            for item in items:
                report.add("recipe", "error", item)
            raise typer.Exit(emit(report)) from exc
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def eval_cmd(
    ctx: typer.Context,
    config: Path = typer.Option(..., "--config", help="eval recipe (configs/eval/*.yaml)"),
    out: Optional[Path] = typer.Option(None, help="output folder (overrides the recipe's out)"),  # noqa: UP045
    no_progress: bool = typer.Option(False, "--no-progress", help="no progress bar"),
    dry_run: bool = typer.Option(False, "--dry-run", help="resolve and check the recipe, print it and the vLLM "
                                                          "command of its serve: block; start nothing"),
    allow_offline: bool = typer.Option(False, "--allow-offline", help="run a benchmark that needs tools (OmniGAIA, "
                                       "WorldSense) in the offline environment anyway; reports say 'offline: no "
                                       "tools' (recipe field allow_offline)"),
    allow_train_overlap: bool = typer.Option(False, "--allow-train-overlap", help="evaluate the served planner on "
                                             "tasks it was trained on (its provenance.json) anyway; the report "
                                             "marks it (recipe field allow_train_overlap)"),
    teacher: Optional[Path] = typer.Option(None, help="the teacher's own eval of the same tasks (its output "  # noqa: UP045
                                           "folder): the report says whether this planner is below it, paired by "
                                           "task (recipe field teacher)"),
) -> None:
    """Run the agent in the loop on a benchmark (resumable) and write trajectories, report.json/md and plots."""
    _logging()
    flags = (["--allow_offline=true"] if allow_offline else []) + \
        (["--allow_train_overlap=true"] if allow_train_overlap else []) + \
        ([f"--teacher={teacher}"] if teacher is not None else [])
    recipe = _recipe(config, ctx.args + flags, out, dry_run="eval" if dry_run else None)
    # one checklist: the dry run lists it (and asks each endpoint GET /models), the run refuses on it and runs it
    prepared = prepare_eval(recipe, probe=dry_run)
    if dry_run:
        raise typer.Exit(emit(dry_run_report(prepared, config, len(cli_overrides(ctx.args)) + (out is not None))))
    with _exit_codes():
        rep = run_prepared(prepared, progress=not no_progress)
    low, high = rep["ci95"]
    acc = rep["accuracy"] or 0.0
    typer.echo(f"{rep.get('name')}: accuracy {100 * acc:.1f}% [{100 * low:.1f}, {100 * high:.1f}] over n={rep['n']} "
               f"({_answered(rep)}; {json.dumps(rep['outcomes'])}) → {recipe.out}/report.md")


def _answered(rep: dict) -> str:
    """"N answered, E errors" of a report, with the accuracy over the answered runs when errors were left out."""
    errors = int(rep.get("error_runs") or 0)
    answered = rep["n"] - errors
    without = rep.get("accuracy_without_errors")
    tail = f", accuracy without errors {100 * without:.1f}%" if errors and without is not None else ""
    return f"{answered} answered, {errors} errors{tail}"


eval_cmd.passthrough = True  # type: ignore[attr-defined]


def compare(
    reports: list[Path] = typer.Argument(..., help="report.json files or eval folders (the first is the reference)"),
    out: Path = typer.Option(Path("runs/compare"), help="folder for compare.md, compare.json, compare.png"),
    title: str = typer.Option("Comparison", help="table title"),
    replace: ReplaceOption = False,
    dry_run: bool = typer.Option(False, "--dry-run", help="check --out and read every report as the run does; print "
                                 "the report of the checks; write nothing"),
) -> None:
    """Side-by-side table of eval runs: accuracy with CI, Δ and CI overlap, outcomes, closure, tokens, tools. The
    folder is written whole (a temporary sibling renamed into place)."""
    _logging()
    checks, loaded = compare_inputs(reports, out, replace)
    _checked("compare", checks, dry_run, would_write=[str(out / f) for f in ("compare.json", "compare.md",
                                                                            "compare.png")])
    with staged_output(out, reports, command="compare", replace=replace) as tmp:
        write_compare(loaded, tmp, title)
    typer.echo((out / "compare.md").read_text("utf-8"))


def compare_inputs(reports: list[Path], out: Path, replace: bool) -> tuple[list, list[dict]]:
    """What `compare` checks before it writes, and its dry run reports: --out (`outputs.output_problems`: never a
    report it reads or a folder holding or inside one; never a foreign folder unless `replace`), every report read
    (`eval.compare.load_report`). Returns the checks and the reports read."""
    problems = output_problems(out, reports, replace=replace)
    checks = [Check(what="out", status="error", detail=p) for p in problems] or \
        [Check(what="out", status="ok", detail=f"{out} (written whole: a temporary sibling renamed into place)")]
    loaded = []
    for path in reports:
        try:
            loaded.append(load_report(path))
        except ValueError as exc:
            checks.append(Check(what="report", status="error", detail=str(exc)))
        else:
            checks.append(Check(what="report", status="ok", detail=f"{path}: n={loaded[-1]['n']}"))
    return checks, loaded


def _checked(command: str, checks: list, dry_run: bool, **extra: object) -> None:
    """A dry run prints its report (`preflight.emit`) and exits (2 on a failed check); a run refuses the same
    failed checks in the same words (`preflight.require`: `error: what: detail`, exit 2) and goes on otherwise."""
    if dry_run:
        raise typer.Exit(emit(DryRunReport(command=command, checks=checks, extra=extra)))
    try:
        require(checks)
    except PreflightError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def ablate(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(None, "--config", help="eval recipe (configs/eval/*.yaml): the modes "  # noqa: UP045
                                          "ablation"),
    grid: Optional[Path] = typer.Option(None, "--grid", help="backend-swap grid (configs/ablate/*.yaml): planner × "  # noqa: UP045
                                        "perception variants, one eval per cell, grid.json/md (eval/grid.py)"),
    out: Path = typer.Option(Path("runs/ablate"), help="output folder: one sub-folder per mode (or grid cell) + "
                                                      "compare.* (or grid.*)"),
    max_tool_calls: Optional[int] = typer.Option(None, help="equal tool-call cap (default: recipe, else T)"),  # noqa: UP045
    modes: Optional[str] = typer.Option(None, help="comma-separated modes (default: ledger,react,memory; not "  # noqa: UP045
                                                   "with --grid)"),
    no_progress: bool = typer.Option(False, "--no-progress", help="no progress bar"),
    dry_run: bool = typer.Option(False, "--dry-run", help="resolve and check the recipe (every grid cell), print "
                                                          "it; start nothing"),
) -> None:
    """Budget-matched ablation: the same tasks in ledger / react / memory modes with equal tool-call caps; or, with
    --grid, the backend-swap grid (planner × perception) with its saturation reading."""
    _logging()
    if (config is None) == (grid is None):
        typer.echo("error: give --config RECIPE (the modes ablation) or --grid GRID.yaml (the backend-swap grid)",
                   err=True)
        raise typer.Exit(2)
    if grid is not None:
        if modes is not None:
            typer.echo("error: --modes is for the modes ablation; a grid cell's mode is its recipe's agent.mode",
                       err=True)
            raise typer.Exit(2)
        _ablate_grid(grid, ctx.args, out, max_tool_calls, not no_progress, dry_run)
        return
    modes = modes or ",".join(MODES)
    chosen = tuple(m.strip() for m in modes.split(",") if m.strip())
    bad = [m for m in chosen if m not in MODES]
    if bad or not chosen:
        typer.echo(f"error: --modes {modes!r}: unknown mode(s) {bad} (known: {', '.join(MODES)})", err=True)
        raise typer.Exit(2)
    assert config is not None
    recipe = _recipe(config, ctx.args, None, dry_run="ablate" if dry_run else None)
    if dry_run:
        report = eval_dry_run(recipe, config, len(cli_overrides(ctx.args)), command="ablate")
        report.extra.update({"modes": list(chosen), "max_tool_calls": max_tool_calls, "out": str(out)})
        raise typer.Exit(emit(report))
    with _exit_codes():
        run_ablation(recipe, out, chosen, max_tool_calls, progress=not no_progress)
    typer.echo((out / "compare.md").read_text("utf-8"))


ablate.passthrough = True  # type: ignore[attr-defined]


def _ablate_grid(grid: Path, args: list[str], out: Path, max_tool_calls: int | None, progress: bool,
                 dry_run: bool) -> None:
    """`ablate --grid`: every cell of planner × perception (`eval.grid`); `--max-tool-calls N` caps every cell."""
    try:
        overrides = cli_overrides(args)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if max_tool_calls is not None:
        overrides.append(f"agent.max_tool_calls={max_tool_calls}")
    if dry_run:
        raise typer.Exit(emit(grid_dry_run(grid, overrides, out)))
    with _exit_codes():
        run_grid(grid, overrides, out, progress=progress)
    typer.echo((out / "grid.md").read_text("utf-8"))


audit_app = typer.Typer(no_args_is_help=True, help="Audits of finished runs (the progress audit of failed runs).")


@audit_app.command("progress")
def audit_progress(
    source: Path = typer.Argument(..., help="an eval/collect folder (its trajectories*.jsonl) or one JSONL file"),
    out: Path = typer.Option(..., help="folder for progress.json and progress.md"),
    tasks: Optional[Path] = typer.Option(  # noqa: UP045
        None, help="the task file with annotated subgoals (default: tasks.path of the folder's recipe.yaml)"),
    fmt: str = typer.Option("auto", "--format", help="task format (default: the recipe's, else detected)"),
    scorer: str = typer.Option("string", help="string (offline, deterministic) or llm (an OpenAI-compatible "
                                              "endpoint; the string scorer then runs too, as the second scorer)"),
    endpoint: Optional[str] = typer.Option(None, help="llm: base URL, e.g. http://localhost:8001/v1"),  # noqa: UP045
    model: Optional[str] = typer.Option(None, help="llm: model name"),  # noqa: UP045
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="llm: variable holding the API key"),
    timeout: float = typer.Option(120.0, help="llm: seconds per request"),
    concurrency: int = typer.Option(8, help="llm: requests in flight"),
    structured: bool = typer.Option(True, help="llm: JSON-schema constrained replies (response_format)"),
    evidence: str = typer.Option("ledger", help="ledger (evidence atoms, filled needs, verified slots) or all "
                                                "(and the tool observations)"),
    min_coverage: float = typer.Option(0.5, help="string: share of a subgoal's key terms that must be found"),
    replace: bool = typer.Option(False, "--replace", help="replace a non-empty --out folder this project did not "
                                 "write (never one that is or holds a file it reads: the report may go inside the "
                                 "eval folder it audits)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="check the options and --out, read the runs and the tasks "
                                 "as the run does; print the report of the checks (an llm endpoint is not "
                                 "contacted); score nothing, write nothing"),
) -> None:
    """Progress audit of the FAILED runs: subgoals of each task's annotated solution reached by the run's evidence,
    full / partial / zero progress, weighted progress, sensitivity → progress.json, progress.md (written whole: a
    temporary sibling renamed into place; --out may lie inside the eval folder, never over a file it reads)."""
    _logging()
    checks, got = progress_inputs(AuditRequest(source=source, out=out, tasks=tasks, fmt=fmt, scorer=scorer,
                                               evidence=evidence, endpoint=endpoint, model=model,
                                               min_coverage=min_coverage, replace=replace))
    _checked("audit progress", checks, dry_run, would_write=[str(out / "progress.json"), str(out / "progress.md")],
             runs=len(got.get("records", [])), tasks=str(got.get("tasks")))
    records, task_list, tasks, string = got["records"], got["task_list"], got["tasks"], got["string"]
    # -- scoring
    if scorer == "llm":
        main = LLMScorer.from_endpoint(ScorerEndpoint(base_url=endpoint or "", model=model or "",
                                                      api_key_env=api_key_env, timeout_s=timeout,
                                                      concurrency=concurrency, structured=structured))
        res = audit(records, task_list, main, evidence=evidence, second=string, concurrency=concurrency)
    else:
        res = audit(records, task_list, string, evidence=evidence)
    res["source"], res["tasks"] = str(source), str(tasks)
    with staged_output(out, got["read"], command="audit progress", replace=replace) as tmp:
        write_audit(tmp, res)
    c = res["counts"]
    wp = res["weighted_progress"]
    typer.echo(f"progress audit ({res['scorer']}): {res['runs']['failed']} failed runs, {c['full']} full / "
               f"{c['partial']} partial / {c['zero']} zero, weighted progress "
               f"{'–' if wp is None else f'{100 * wp:.1f}%'}, {res['scorer_errors']} scorer errors, "
               f"{res['runs']['no_subgoals']} without subgoals → {out}/progress.md")


@dataclass(frozen=True)
class AuditRequest:
    """What `audit progress` was asked: the runs, the tasks, the scorer and --out (its command line, typed)."""

    source: Path  # an eval/collect folder or one JSONL file
    out: Path
    tasks: Path | None  # None: the tasks of the folder's recipe.yaml
    fmt: str
    scorer: str  # string or llm
    evidence: str  # ledger or all
    endpoint: str | None
    model: str | None
    min_coverage: float
    replace: bool


def progress_inputs(request: AuditRequest) -> tuple[list, dict]:
    """What `audit progress` checks and reads before it scores, and its dry run reports: the options, the runs,
    the tasks (given, or the eval folder's recipe.yaml), --out (`outputs.output_problems` against the files it
    reads: the report may go inside the eval folder, never over its trajectories or tasks), the llm endpoint's URL
    (not contacted). Returns the checks and what was read (records, task_list, tasks, read)."""
    source, out, tasks, fmt = request.source, request.out, request.tasks, request.fmt
    scorer, evidence, endpoint, model = request.scorer, request.evidence, request.endpoint, request.model
    checks: list[Check] = []
    got: dict = {}
    if scorer not in ("string", "llm"):
        checks.append(Check(what="--scorer", status="error", detail=f"{scorer!r}: expected string or llm"))
    if evidence not in ("ledger", "all"):
        checks.append(Check(what="--evidence", status="error", detail=f"{evidence!r}: expected ledger or all"))
    if scorer == "llm":
        if not (endpoint and model):
            checks.append(Check(what="--scorer llm", status="error", detail="needs --endpoint URL and --model NAME"))
        else:
            checks.append(check_url(endpoint, "--endpoint"))
    try:
        got["string"] = StringScorer(request.min_coverage)
    except ValueError as exc:
        checks.append(Check(what="--min-coverage", status="error", detail=str(exc)))
    if any(c.status == "error" for c in checks):
        return checks, got
    # -- runs and tasks
    from_recipe = ""
    try:
        got["records"] = load_runs(source)
        checks.append(Check(what="runs", status="ok", detail=f"{source}: {len(got['records'])} runs"))
        if tasks is None:
            found = recipe_tasks(source) if source.is_dir() else None
            if found is None:
                raise ValueError(f"{source}: no recipe.yaml naming the tasks; give --tasks TASKFILE")
            tasks, fmt = Path(found[0]), found[1] if fmt == "auto" else fmt
            from_recipe = f" (the tasks of {source / 'recipe.yaml'}; give --tasks TASKFILE)"
        got["task_list"], got["tasks"] = load_tasks(tasks, fmt=fmt), tasks
        checks.append(Check(what="tasks", status="ok", detail=f"{tasks}: {len(got['task_list'])} tasks"))
    except (ValueError, OSError) as exc:
        checks.append(Check(what="runs and tasks", status="error", detail=f"{exc}{from_recipe}"))
        return checks, got
    got["read"] = [*(sorted(source.glob("trajectories*.jsonl")) if source.is_dir() else [source]), tasks]
    problems = output_problems(out, got["read"], replace=request.replace)
    checks += [Check(what="out", status="error", detail=p) for p in problems] or \
        [Check(what="out", status="ok", detail=f"{out} (written whole: a temporary sibling renamed into place)")]
    return checks, got
