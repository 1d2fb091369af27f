"""Every dry run checks what its run checks (`collect` and `eval` through the rollout engine): for each reason the
run refuses before its first write, the dry run asks the run's own function, says so as an error, and the run
refuses in that error line's words (`what: detail`) and writes nothing.

- a restart with another agent config or other backends (`output.manifest_problem`, OUT/manifest.json);
- a trajectory file another process holds (`store.busy_problem`, held here by a real second process);
- a trajectory file that is not JSONL (`store.resume_problem`; a line torn by a kill is still resumed);
- a backend the run builds in-process that cannot be built (`factory.backend_problem`: a local planner folder
  without a checkpoint, a teacher option typo), found without loading any weights;
- an environment service entry that does not take `environment.options` (`services.service_problem`: its signature
  read, the factory never called by the dry run);
- the file an unsharded eval writes and resumes is OUT/trajectories.jsonl (`PreparedEval.out_file`), the one its dry
  run reads and its run locks.

    .venv/bin/pytest -q tests/rollout/test_dry_run_parity.py
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.collect.dryrun import dry_run as collect_dry_run
from omnidecision.collect.recipe import CollectRecipe
from omnidecision.eval.checklist import eval_recipe_from_dict
from omnidecision.eval.dryrun import eval_dry_run
from omnidecision.eval.runner import run_eval
from omnidecision.outputs import OutputBusy
from omnidecision.preflight import Check, DryRunReport
from omnidecision.rollout.engine import run_rollouts
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.recipe import EvalRecipe, RecipeError, load_recipe
from omnidecision.rollout.selection import TaskSelection
from omnidecision.rollout.store import shard_of
from omnidecision.tasks.synth import write_suite
from tests.refusals import same_refusal

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "collect" / "synthetic-teacher.yaml"
HOLD = ("import sys, time\nfrom omnidecision.outputs import exclusive\n"
        "with exclusive(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)\n")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_suite(6, 3, tmp_path_factory.mktemp("parity-suite"))


@pytest.fixture
def hold() -> Iterator[Callable[[Path], subprocess.Popen]]:
    """hold(target): a second process that holds `target`'s lock (`outputs.exclusive`) until the test ends."""
    procs: list[subprocess.Popen] = []

    def start(target: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(target)], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _collect_args(suite: Path, out: Path, *extra: str) -> list[str]:
    return [f"tasks.path={suite}", "tasks.format=synthetic", "backends.default.kind=teacher", f"out={out}",
            "tasks.limit=3", "concurrency=2", "progress=false", *extra]


def _collect(args: list[str]) -> None:
    asyncio.run(run_rollouts(load_recipe(None, args, model=CollectRecipe)))


def _eval_recipe(suite: Path, out: Path, **agent: object) -> EvalRecipe:
    return eval_recipe_from_dict({
        "name": "parity", "tasks": {"path": str(suite), "format": "synthetic", "limit": 3},
        "backends": {"default": {"kind": "teacher", "options": {"seed": 1}}}, "agent": dict(agent),
        "samples": 1, "concurrency": 2, "out": str(out), "progress": False, "plots": False})


def _eval_dry_run(recipe: EvalRecipe) -> DryRunReport:
    return eval_dry_run(recipe, Path("recipe.yaml"), 0)


def _only(report: DryRunReport, what: str) -> Check:
    [check] = [c for c in report.checks if c.what == what]
    return check


def _files(out: Path) -> dict[str, bytes]:
    """Every file under `out` but the lock files (the run takes its lock before it refuses: that is the lock)."""
    if not out.exists():
        return {}
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


# ---------------------------------------------------------------- (a) another experiment's manifest.json


@pytest.mark.parametrize(("change", "named"), [("agent.step_budget=3", "config_digest"),
                                               ("backends.default.options.seed=5", "backends.default")])
def test_a_restart_of_another_experiment_is_refused_by_both(suite, tmp_path, change, named):
    out = tmp_path / "runs"
    _collect(_collect_args(suite, out))
    resumed = _only(collect_dry_run(None, _collect_args(suite, out)), "out")
    assert resumed.status == "ok" and "resumes trajectories.shard-0-of-1.jsonl" in resumed.detail
    before = _files(out)

    error = _only(collect_dry_run(None, _collect_args(suite, out, change)), "out")
    assert error.status == "error", error
    assert "holds runs of a different agent config or backends" in error.detail and named in error.detail
    with pytest.raises(RecipeError) as refused:
        _collect(_collect_args(suite, out, change))
    assert str(refused.value) == f"out: {error.detail}"
    assert _files(out) == before


# ---------------------------------------------------------------- (b) the lock another process holds


def test_a_shard_another_process_holds_is_refused_by_both(suite, tmp_path, hold):
    out = tmp_path / "runs"
    holder = hold(shard_path(out, 0, 1))
    error = _only(collect_dry_run(None, _collect_args(suite, out)), "out")
    assert error.status == "error" and f"pid {holder.pid}" in error.detail, error
    with pytest.raises(OutputBusy) as refused:
        _collect(_collect_args(suite, out))
    assert str(refused.value) == f"out: {error.detail}"
    assert _files(out) == {}


def test_an_eval_whose_trajectory_file_another_process_holds_is_refused_by_both(suite, tmp_path, hold):
    """An unsharded eval writes OUT/trajectories.jsonl: that is the file its dry run asks about."""
    out = tmp_path / "eval"
    holder = hold(out / "trajectories.jsonl")
    recipe = _eval_recipe(suite, out)
    error = _only(_eval_dry_run(recipe), "out")
    assert error.status == "error" and f"pid {holder.pid}" in error.detail and "trajectories.jsonl" in error.detail
    with pytest.raises(OutputBusy) as refused:
        run_eval(recipe, progress=False)
    assert str(refused.value) == f"out: {error.detail}"
    assert _files(out) == {}


# ---------------------------------------------------------------- (c) a trajectory file that is not JSONL


@pytest.mark.parametrize(("data", "words"), [(b"{not json\n", ":1: not valid JSON"),
                                             (b'{"run_id": "x"}\n', ":1: field"),
                                             (b"\xff\xfe{\x00\x01", "are not UTF-8 JSON")])
def test_a_shard_that_is_not_jsonl_is_refused_by_both(suite, tmp_path, data, words):
    out = tmp_path / "runs"
    shard = shard_path(out, 0, 1)
    shard.parent.mkdir(parents=True)
    shard.write_bytes(data)
    error = _only(collect_dry_run(None, _collect_args(suite, out)), "out")
    assert error.status == "error" and str(shard) in error.detail and words in error.detail, error
    with pytest.raises(RecipeError) as refused:
        _collect(_collect_args(suite, out))
    assert str(refused.value) == f"out: {error.detail}"
    assert _files(out) == {shard.name: data}  # untouched, and no manifest.json


def test_a_line_torn_by_a_kill_is_resumed_not_refused(suite, tmp_path):
    out = tmp_path / "runs"
    shard = shard_path(out, 0, 1)
    shard.parent.mkdir(parents=True)
    shard.write_bytes(b'{"run_id": "x", "ques')
    check = _only(collect_dry_run(None, _collect_args(suite, out)), "out")
    assert check.status == "ok" and "resumes" in check.detail
    _collect(_collect_args(suite, out))
    assert len(shard.read_text("utf-8").splitlines()) == 3


# ---------------------------------------------------------------- (d) a backend the run builds in-process


def _empty(tmp: Path) -> Path:
    (tmp / "empty").mkdir()
    return tmp / "empty"


@pytest.mark.parametrize(("args", "what", "words"), [
    (lambda tmp: ["backends.planner.kind=local", f"backends.planner.model={tmp / 'missing'}"],
     "backends.planner", "does not exist"),
    (lambda tmp: ["backends.planner.kind=local", f"backends.planner.model={_empty(tmp)}"],
     "backends.planner", "holds no config.json"),
    (lambda tmp: ["backends.default.options.nosie=0.2"], "backends.default", "unknown options ['nosie']"),
    (lambda tmp: ["backends.default.options.noise=1.5"], "backends.default", "not a probability"),
])
def test_a_backend_that_cannot_be_built_is_refused_by_both(suite, tmp_path, args, what, words):
    out = tmp_path / "runs"
    extra = args(tmp_path)
    error = _only(collect_dry_run(None, _collect_args(suite, out, *extra)), what)
    assert error.status == "error" and words in error.detail, error
    with pytest.raises(RecipeError) as refused:
        _collect(_collect_args(suite, out, *extra))
    assert str(refused.value) == f"{what}: {error.detail}"
    assert not out.exists()


def test_the_collect_command_prints_the_same_error_line_for_both(suite, tmp_path):
    """End to end: `collect --dry-run` and `collect` exit 2 with one identical error line (a teacher option typo)."""
    out = tmp_path / "runs"
    args = ["collect", "--config", str(RECIPE), "--tasks.path", str(suite), "--tasks.limit", "2", "--out", str(out),
            "--no-progress", "--backends.default.options.nosie", "0.2"]
    dry, real = CliRunner().invoke(app, [*args, "--dry-run"]), CliRunner().invoke(app, args)
    assert dry.exit_code == real.exit_code == 2, (dry.output, real.output)
    lines = [[line for line in res.stderr.splitlines() if line.startswith("error:")] for res in (dry, real)]
    assert lines[0] == lines[1] and len(lines[0]) == 1, lines
    assert "backends.default: backend kind 'teacher': unknown options ['nosie']" in lines[0][0]
    assert not out.exists()


def test_a_local_planner_folder_is_checked_without_loading_its_weights(suite, tmp_path):
    """A folder with a config.json passes (that config loads no model: nothing was loaded); an option the local
    backend does not take is the run's error."""
    planner = tmp_path / "planner"
    planner.mkdir()
    (planner / "config.json").write_text("{}")
    args = _collect_args(suite, tmp_path / "runs", "backends.planner.kind=local", f"backends.planner.model={planner}")
    assert _only(collect_dry_run(None, args), "backends.planner").status == "ok"
    error = _only(collect_dry_run(None, [*args, "backends.planner.options.temp=1"]), "backends.planner")
    assert error.status == "error" and "unknown options ['temp']" in error.detail


# ---------------------------------------------------------------- (e) an environment service entry


CALLED: list[dict[str, object]] = []


def echo_service(greeting: str = "hi") -> dict[str, str]:
    """A service factory for the recipe below; records each call (a dry run must make none)."""
    CALLED.append({"greeting": greeting})
    return {"greeting": greeting}


@pytest.mark.parametrize(("option", "words"), [("greting", "cannot be called with environment.options ['greting']"),
                                               (None, "cannot import")])
def test_a_service_the_run_cannot_call_is_refused_by_both(suite, tmp_path, option, words):
    out = tmp_path / "runs"
    target = f"{__name__}:echo_service" if option else f"{__name__}:no_such_factory"
    extra = [f"environment.services.echo={target}", f"environment.options.{option or 'greeting'}=hello"]
    CALLED.clear()
    error = _only(collect_dry_run(None, _collect_args(suite, out, *extra)), "environment.services.echo")
    assert error.status == "error" and words in error.detail, error
    with pytest.raises(RecipeError) as refused:
        _collect(_collect_args(suite, out, *extra))
    assert str(refused.value) == f"environment.services.echo: {error.detail}"
    assert _files(out) == {} and CALLED == []


def test_a_service_that_takes_its_options_passes_without_being_called(suite, tmp_path):
    extra = [f"environment.services.echo={__name__}:echo_service", "environment.options.greeting=hello"]
    CALLED.clear()
    check = _only(collect_dry_run(None, _collect_args(suite, tmp_path / "runs", *extra)), "environment.services.echo")
    assert check.status == "ok" and CALLED == []
    _collect(_collect_args(suite, tmp_path / "runs", *extra))
    assert CALLED == [{"greeting": "hello"}]  # the run calls it, once


# ---------------------------------------------------------------- (f) an unsharded eval's own file, resumed


def test_an_eval_restart_is_checked_on_the_file_it_resumes(suite, tmp_path):
    out = tmp_path / "eval"
    recipe = _eval_recipe(suite, out)
    fresh = _only(_eval_dry_run(recipe), "out")
    assert fresh.status == "ok" and "created by the run" in fresh.detail and "trajectories.jsonl" in fresh.detail
    run_eval(recipe, progress=False)
    assert (out / "trajectories.jsonl").is_file() and not shard_path(out, 0, 1).exists()
    resumed = _only(_eval_dry_run(recipe), "out")
    assert resumed.status == "ok" and "resumes trajectories.jsonl" in resumed.detail, resumed
    before = _files(out)

    other = _eval_recipe(suite, out, step_budget=3)  # (a) on eval: another agent config into the same --out
    error = _only(_eval_dry_run(other), "out")
    assert error.status == "error" and "holds runs of a different agent config" in error.detail
    with pytest.raises(RecipeError) as refused:
        run_eval(other, progress=False)
    assert str(refused.value) == f"out: {error.detail}" and _files(out) == before

    with (out / "trajectories.jsonl").open("ab") as fh:  # (c) on eval: a line that is no record
        fh.write(b"{not json\n")
    before = _files(out)
    error = _only(_eval_dry_run(recipe), "out")
    assert error.status == "error" and "trajectories.jsonl:4: not valid JSON" in error.detail, error
    with pytest.raises(RecipeError) as refused:
        run_eval(recipe, progress=False)
    assert str(refused.value) == f"out: {error.detail}" and _files(out) == before


# ---------------------------------------------------------------- (f) collect refuses on its dry run's one list


def test_collect_refuses_an_unreadable_task_path_in_its_dry_runs_line(tmp_path):
    """The collect command makes the dry run's checklist (`rollout.checks.rollout_checks`) and stops on its first
    error in the same line, before --out is made (before, the run said the loader's words, the dry run `tasks: ...`
    with the path twice)."""
    missing, out = tmp_path / "no-such-suite", tmp_path / "runs"
    line = same_refusal(["collect", "--config", str(RECIPE), "--tasks.path", str(missing), "--out", str(out),
                         "--no-progress"], names="no such synthetic suite folder")
    assert line == f"error: tasks: {missing}: no such synthetic suite folder"
    assert not out.exists()


def test_a_collection_shard_without_tasks_is_a_warning_and_an_eval_shard_an_error(suite, tmp_path):
    """More shards than tasks: a collection shard has nothing to do (its dry run warns, the run writes no run and
    exits 0); an eval shard has nothing to report (refused by both, in one line)."""
    ids = [t.id for t in TaskSelection(load_recipe(None, _collect_args(suite, tmp_path / "x", "tasks.limit=1"),
                                                   model=CollectRecipe))()[1]]
    assert len(ids) == 1, ids
    empty = next(i for i in range(2) if shard_of(ids[0], 2) != i)
    out = tmp_path / "runs"
    args = ["collect", "--config", str(RECIPE), "--tasks.path", str(suite), "--tasks.limit", "1", "--shard",
            f"{empty}/2", "--out", str(out), "--no-progress"]
    dry = CliRunner().invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0 and "(none in this shard)" in dry.stdout, dry.stdout[-2000:]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0 and "0 new runs" in run.stdout, (run.stdout, run.stderr)
    recipe = _eval_recipe(suite, tmp_path / "eval")
    recipe = recipe.model_copy(update={"shard": f"{empty}/2", "tasks": recipe.tasks.model_copy(update={"limit": 1})})
    error = _only(_eval_dry_run(recipe), "tasks")
    assert error.status == "error" and error.detail.endswith("(none in this shard)"), error
    with pytest.raises(RecipeError) as refused:
        run_eval(recipe, progress=False)
    assert str(refused.value) == f"tasks: {error.detail}"
    assert not (tmp_path / "eval").exists()
