"""The one launcher of the trained stages (`sft`, `grpo`, `judge train`, `rft-select`): what a stage declares
(`Stage`), the command a run starts (`stage_command`, shared by the CLIs and the dry runs), the CLI body every stage
command calls (`launch_stage`) and every command's old flag spellings, translated
with a deprecation warning (`translate_aliases`, `translate_command_aliases`; listed in CHANGELOG.md).

The launcher sits below the stages and imports none of them: each stage declares its `Stage` next to its parser
(`sft/config.py: SFT_STAGE`, `rl/config.py: GRPO_STAGE` and `RFT_STAGE`, `rl/judge_config.py: JUDGE_STAGE`) and its
command passes that object, its training entry and its dry run to `launch_stage` (tests/architecture reads these
imports).

Every stage reads a YAML recipe under `configs/<stage>/` with `--config` and parses it with `trl.TrlParser` into typed
dataclasses (TRL's SFTConfig / GRPOConfig / RewardConfig subclassed with the project's fields). Flag spelling
(docs/architecture.md, "One launcher"): a recipe field is overridden as `--snake_case VALUE`, its field name as TRL
spells it; an option of the launcher itself, not a recipe field, is `--kebab-case` (`--config`, `--accelerate-config`,
`--num-processes`, `--dry-run`, rft-select's `--out`, `--val`, `--max-states`).

`omnidecision grpo --config R.yaml` alone is one Python process: one GPU, no DeepSpeed. With
`--accelerate-config configs/accelerate/zero3.yaml` (and/or `--num-processes N`) the command re-runs the stage's
module under `accelerate launch`, one process per GPU, with the same recipe and overrides:

    omnidecision grpo --accelerate-config configs/accelerate/zero3.yaml \
        --config configs/grpo/qwen3-8b-vllm-colocate.yaml
    # runs: python -m accelerate.commands.launch --config_file configs/accelerate/zero3.yaml \
    #           -m omnidecision.rl.train --config configs/grpo/qwen3-8b-vllm-colocate.yaml
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from omnidecision.outputs import overlap_problems
from omnidecision.preflight import (
    Check,
    PreflightError,
    check_accelerate_config,
    check_attention,
    check_folder,
    check_model,
    check_resume,
    check_split_columns,
    check_tracking,
    emit,
    hide_argv_secrets,
    split_files,
)

logger = logging.getLogger(__name__)

# The launcher options of every trained stage's command (sft, grpo, grpo-agent), declared once
AccelerateConfigOption = Annotated[str | None, typer.Option(
    "--accelerate-config", help="Run under `accelerate launch` with this config (configs/accelerate/).")]
NumProcessesOption = Annotated[int | None, typer.Option(
    "--num-processes", help="Processes (GPUs) for `accelerate launch` (default: the config's).")]
DryRunOption = Annotated[bool, typer.Option(
    "--dry-run", help="Resolve and check; print the configuration; start nothing")]

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@dataclass(frozen=True)
class Stage:
    """A trained stage as its own package declares it (next to its parser, `<stage>/config.py`) and hands it to the
    launcher: the module `python -m` runs (its `__main__` parses the same recipe + overrides; only ever a command
    line here, never imported), its parser, whether it runs under accelerate, and its old flag spellings. The
    training entry and the dry run are passed to `launch_stage` as objects by the stage's command."""

    name: str
    module: str
    parse: Callable[[list[str]], tuple[Any, Any, Any]]
    accelerate: bool = True
    aliases: Mapping[str, str] = field(default_factory=dict)  # old flag -> the recipe field's flag
    bool_aliases: Mapping[str, str] = field(default_factory=dict)  # old --flag/--no-flag -> the recipe field's flag


# Old flag spellings (CHANGELOG.md, "Deprecated"): each still works and prints one warning to stderr per process.
# `judge train` and `rft-select` (Typer flags before these stages read recipes): aliases of recipe fields
JUDGE_ALIASES = {"--data": "--dataset_name", "--model": "--model_name_or_path", "--out": "--output_dir",
                 "--max-steps": "--max_steps", "--batch-size": "--per_device_train_batch_size",
                 "--learning-rate": "--learning_rate", "--max-length": "--max_length"}
RFT_ALIASES = {"--model": "--model_name_or_path", "--data": "--dataset_name", "--samples": "--num_generations",
               "--match-steps": "--max_steps", "--match_steps": "--max_steps"}
# the other commands' old spellings, by command path: `omnidecision/cli.py` translates them before Typer parses the
# command line (`translate_command_aliases`), so --help shows only the current names
COMMAND_ALIASES: dict[tuple[str, ...], dict[str, str]] = {
    # collect's shortcuts of recipe overrides: eval, ablate and the plans spell the recipe key
    ("collect",): {"--tasks": "--tasks.path", "--format": "--tasks.format", "--limit": "--tasks.limit",
                   "--mode": "--agent.mode"},
    ("run",): {"--fmt": "--format"},  # a task file's format is --format everywhere
    ("tool",): {"--task": "--tasks"},  # the task file, as `run` and `audit progress` name it
    ("experiment",): {"--seeds": "--starts"},  # the recipe's `starts`
}
_WARNED: set[str] = set()  # "command old-flag" already warned about in this process


def warn_deprecated(command: str, old: str, new: str) -> None:
    """Tell the user once per process (stderr) that `old` is an old spelling of `new` in `command`."""
    if f"{command} {old}" in _WARNED:
        return
    _WARNED.add(f"{command} {old}")
    sys.stderr.write(f"warning: `omnidecision {command} {old}` is deprecated, use `{new}` (CHANGELOG.md)\n")


def translate_aliases(args: Sequence[str], aliases: Mapping[str, str],
                      bool_aliases: Mapping[str, str] | None = None, command: str = "") -> list[str]:
    """`args` with old flag spellings replaced by the current ones (`--opt v` and `--opt=v` forms), each old one
    warned about once (`warn_deprecated`, naming `command`); `bool_aliases`: `--flag` / `--no-flag` become
    `--field true|false`. Arguments after `--` are left alone.

    >>> translate_aliases(["--max-steps", "4", "--seed=1", "--no-use-cpu"], {"--max-steps": "--max_steps"},
    ...                   {"--use-cpu": "--use_cpu"})
    ['--max_steps', '4', '--seed=1', '--use_cpu', 'false']
    """
    bool_aliases = bool_aliases or {}
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + list(args[i:])
        name, eq, value = arg.partition("=")
        if name in aliases:
            warn_deprecated(command, name, aliases[name])
            out.append(f"{aliases[name]}={value}" if eq else aliases[name])
        elif name in bool_aliases and not eq:
            warn_deprecated(command, name, f"{bool_aliases[name]} true")
            out += [bool_aliases[name], "true"]
        elif name.startswith("--no-") and "--" + name[5:] in bool_aliases and not eq:
            warn_deprecated(command, name, f"{bool_aliases['--' + name[5:]]} false")
            out += [bool_aliases["--" + name[5:]], "false"]
        else:
            out.append(arg)
    return out


def translate_command_aliases(args: Sequence[str]) -> list[str]:
    """A whole `omnidecision` command line (`args` after the program name) with the old spellings of its command
    (`COMMAND_ALIASES`) replaced by the current ones, each warned about once.

    >>> translate_command_aliases(["run", "--tasks", "t.jsonl", "--fmt=jsonl"])
    ['run', '--tasks', 't.jsonl', '--format=jsonl']
    """
    for path, aliases in COMMAND_ALIASES.items():
        if tuple(args[:len(path)]) == path:
            return [*path, *translate_aliases(args[len(path):], aliases, command=" ".join(path))]
    return list(args)


def accelerate_command(stage: Stage, stage_args: Sequence[str], *, config_file: str | None = None,
                       num_processes: int | None = None, python: str | None = None) -> list[str]:
    """The `accelerate launch` command line that runs `stage` with `stage_args` (recipe and overrides).

    >>> grpo = Stage("grpo", "omnidecision.rl.train", parse=list)
    >>> accelerate_command(grpo, ["--config", "r.yaml"], num_processes=8, python="python")[3:6]
    ['--multi_gpu', '--num_processes', '8']
    >>> accelerate_command(grpo, ["--config", "r.yaml"], num_processes=8, python="python")[-4:]
    ['-m', 'omnidecision.rl.train', '--config', 'r.yaml']
    """
    if not stage.accelerate:
        raise ValueError(f"no accelerate launch for stage {stage.name!r}")
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"--num-processes must be >= 1, got {num_processes}")
    problem = cpu_processes_problem(config_file, num_processes)
    if problem:
        raise ValueError(problem)
    cmd = [python or sys.executable, "-m", "accelerate.commands.launch"]
    if config_file is not None:
        cmd += ["--config_file", str(config_file)]
    elif num_processes is not None and num_processes > 1:
        cmd += ["--multi_gpu"]  # without a config file: plain data parallel (DDP)
    if num_processes is not None:
        cmd += ["--num_processes", str(num_processes)]
    return [*cmd, "-m", stage.module, *stage_args]


def cpu_processes_problem(config_file: str | Path | None, num_processes: int | None) -> str | None:
    """Why `--num-processes` cannot run under a MULTI_CPU accelerate config, or None: accelerate's CPU launch starts
    one process per machine (several on one machine need mpirun), so `--num-processes 2` with
    configs/accelerate/cpu.yaml would silently train in one process. Across CPU nodes, each node launches its one
    process with `--num_machines` (scripts/slurm/sft.slurm, grpo.slurm)."""
    import yaml

    if config_file is None or not num_processes or not Path(config_file).is_file():
        return None
    try:
        cfg = yaml.safe_load(Path(config_file).read_text("utf-8"))
    except yaml.YAMLError:
        return None  # check_accelerate_config names a broken file
    if not isinstance(cfg, dict) or cfg.get("distributed_type") != "MULTI_CPU":
        return None
    machines = int(cfg.get("num_machines") or 1)
    if num_processes <= machines:
        return None
    return (f"{config_file}: MULTI_CPU starts one process per machine ({machines} in the config), so --num-processes "
            f"{num_processes} would train in {machines}: on one machine give --num-processes {machines}; across CPU "
            "nodes launch one process on each with --num_machines (scripts/slurm/sft.slurm)")


def stage_command(stage: Stage, stage_args: Sequence[str], *, accelerate_config: str | None = None,
                  num_processes: int | None = None, python: str | None = None) -> list[str]:
    """The command a real run of `stage` starts: under `accelerate launch` when asked for, else the stage's module.
    What `--dry-run` prints and what the CLI runs.

    >>> judge = Stage("judge train", "omnidecision.rl.judge_train", parse=list, accelerate=False)
    >>> stage_command(judge, ["--config", "j.yaml"], python="python")
    ['python', '-m', 'omnidecision.rl.judge_train', '--config', 'j.yaml']
    """
    if accelerate_config is not None or num_processes is not None:
        if not stage.accelerate:
            raise ValueError(f"{stage.name} runs in one process: --accelerate-config / --num-processes do not apply")
        return accelerate_command(stage, stage_args, config_file=accelerate_config, num_processes=num_processes,
                                  python=python)
    return [python or sys.executable, "-m", stage.module, *stage_args]


def stage_args(stage: Stage, config: str | Path, extra: Sequence[str]) -> list[str]:
    """`--config RECIPE` + the overrides, old spellings translated (`translate_aliases`)."""
    return ["--config", str(config), *translate_aliases(list(extra), stage.aliases, stage.bool_aliases, stage.name)]


def parse_stage_args(stage: Stage, args: Sequence[str]) -> tuple[Any, Any, Any]:
    """The typed configs of `stage` from `--config RECIPE` + overrides (TrlParser; unknown keys are errors)."""
    return stage.parse(list(args))


def launch_stage(stage: Stage, args: Sequence[str], *, main: Callable[..., Any],
                 check: Callable[..., Any] | None = None, accelerate_config: str | None = None,
                 num_processes: int | None = None, dry_run: bool = False, **options: Any) -> Any:
    """The body of every stage command: `--dry-run` prints the report `check` builds and exits (0 ok, 2 a check
    failed); with `--accelerate-config` / `--num-processes` the stage's module runs under `accelerate launch` (its
    exit code); else the recipe is parsed here (a bad recipe or override: a usage error naming it) and the stage
    trains in this process, returning what `main` returns. `main` and `check` are the stage's own functions, passed
    by its command; `options`: the stage's own (non-recipe) options, passed to `main`."""
    args = hide_argv_secrets(list(args))  # the hub token into HF_TOKEN; every key on the line hidden when printed
    if dry_run:
        if check is None:
            raise typer.BadParameter(f"{stage.name} has no --dry-run", param_hint="--dry-run")
        raise typer.Exit(emit(check(args, accelerate_config=accelerate_config, num_processes=num_processes,
                                    **options)))
    recipe = args[args.index("--config") + 1] if "--config" in args else None
    if recipe is not None and not Path(recipe).is_file():
        raise typer.BadParameter(f"recipe {recipe} does not exist", param_hint="--config")
    if accelerate_config is not None or num_processes is not None:
        try:
            cmd = stage_command(stage, args, accelerate_config=accelerate_config, num_processes=num_processes)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--accelerate-config / --num-processes") from exc
        typer.echo(f"launching: {render(cmd)}", err=True)
        raise typer.Exit(run(cmd))
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        parsed = parse_stage_args(stage, args)
    except (ValueError, FileNotFoundError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--config / overrides") from exc
    try:
        return main(*parsed, **options)
    except PreflightError as exc:  # refused before it started: the dry run's error line, no traceback
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def run(cmd: Sequence[str]) -> int:
    """Run the launcher in the foreground; its exit code (a signal to this process reaches the whole group)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(list(cmd), env=env).returncode


def render(cmd: Sequence[str]) -> str:
    return shlex.join(list(cmd))


def model_check_list(model_args: Any) -> list[Any]:
    """The checks of the starting model every trained stage makes before it starts (its dry run and its real run):
    the checkpoint, the tokenizer when named apart, the attention implementation."""
    checks = [check_model(model_args.model_name_or_path, "model_name_or_path")]
    if getattr(model_args, "tokenizer_name_or_path", None):
        checks.append(check_model(model_args.tokenizer_name_or_path, "tokenizer_name_or_path"))
    checks.append(check_attention(model_args.attn_implementation))
    return checks


def output_dir_checks(training: Any, inputs: list[Any]) -> list[Any]:
    """A trained stage's `output_dir` is written in place (and resumed): never one of its inputs (the start model,
    the data) nor inside one (a checkpoint inside a dataset folder becomes part of what a loader reads)."""
    output_dir = getattr(training, "output_dir", None)
    if not output_dir:
        return []
    return [Check(what="output_dir", status="error", detail=p)
            for p in overlap_problems(output_dir, inputs, what="output_dir", ways=("is", "is inside"))]


def resume_checks(training: Any) -> list[Any]:
    """Where a trained stage starts (`resume_from_checkpoint`, read by `checkpoints.resolve_resume`): a named
    checkpoint that is not there is an error. In each stage's checks function (`sft_checks`, `grpo_checks`,
    `judge_checks`), so its run refuses it before anything loads, in the words of its dry run."""
    if not hasattr(training, "resume_from_checkpoint"):
        return []
    return [check_resume(training.resume_from_checkpoint, training.output_dir)]


# what the dev_closure checkpoint policy's scorer reads of every dev state (rl/evaluate.py: dev_closure_scorer)
DEV_STATE_COLUMNS = ("prompt", "ledger")


def rl_states_folder(path: str | Path) -> Path:
    """The folder holding a harvest's RL splits: `path/rl` when it exists, else `path` (a harvest folder or its rl/
    folder). The one rule of rl's loader (rl/data.py:rl_folder) and of SFT's dev_closure check; here because both
    stages sit above the launcher and SFT may not import rl."""
    p = Path(path)
    return p / "rl" if (p / "rl").is_dir() else p


def dev_closure_checks(policy: Any, dev_data: Callable[[], str],
                       rows_problem: Callable[[list[str]], str | None]) -> list[Any]:
    """`checkpoint_policy: dev_closure` (`policy`: a stage's `checkpoints.CheckpointPolicyArguments`): the dev states
    that score every candidate, as the scorer (rl/evaluate.py:dev_closure_scorer) reads them when training starts.
    `dev_data()` (the stage's rule for where they are) names a folder, `checkpoint_dev_split` is one of its splits,
    with the `prompt` and `ledger` columns; `rows_problem` (the first problem of the split's files: `inputs.
    split_problem` with the stage's row check, passed in because the launcher sits below `inputs`) finds a row
    without them or a split with no rows. None of this for another policy (no dev state is read)."""
    if policy.checkpoint_policy != "dev_closure":
        return []
    try:
        folder = dev_data()
    except (ValueError, KeyError, OSError) as exc:  # SFT's rule reads an rft_select.json when there is one
        return [Check(what="checkpoint_dev_data", status="error", detail=str(exc))]
    if not Path(folder).exists():
        return [Check(what="checkpoint_dev_data", status="error", detail=f"checkpoint_policy=dev_closure: {folder} "
                                                                        "does not exist (a harvest folder holding "
                                                                        "rl/, or rl/ itself)")]
    states = rl_states_folder(folder)
    try:
        files = split_files(states)
    except (FileNotFoundError, OSError, ValueError) as exc:
        return [Check(what="checkpoint_dev_data", status="error", detail=f"checkpoint_policy=dev_closure: {exc}")]
    split = policy.checkpoint_dev_split
    if split not in files:
        return [Check(what="checkpoint_dev_split", status="error", detail=f"{states}: no `{split}` split (found "
                                                                         f"{sorted(files)}): checkpoint_policy="
                                                                         "dev_closure scores its candidates on it")]
    columns = check_split_columns(files, "checkpoint_dev_data", str(states), DEV_STATE_COLUMNS, [split])
    if columns.status != "ok":
        return [columns]
    if (problem := rows_problem(files[split])) is not None:
        return [Check(what="checkpoint_dev_data", status="error", detail=f"split {split!r}: {problem}")]
    return [Check(what="checkpoint_dev_data", status="ok", detail=f"{states} split {split!r} scores the "
                                                                  "dev_closure candidates")]


def launch_checks(report: Any, stage: Stage, args: Sequence[str], training: Any, *,
                  accelerate_config: str | None = None, num_processes: int | None = None) -> None:
    """The checks every trained stage's dry run ends with (tracking, output_dir, the accelerate config) and the
    command the real run starts (`stage_command`). Where training starts is checked by the stage's own checks
    (`resume_checks`), which its run makes too."""
    report.checks.append(check_tracking(training.report_to))
    report.checks.append(check_folder(training.output_dir, "output_dir", must_exist=False))
    report.checks.append(check_accelerate_config(accelerate_config))
    try:
        report.would_run = [render(stage_command(stage, args, accelerate_config=accelerate_config,
                                                 num_processes=num_processes))]
    except ValueError as exc:  # the run refuses the launch in the same words
        report.add("launch", "error", str(exc))
