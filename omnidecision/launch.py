"""The one launcher of the trained stages (`sft`, `grpo`, `judge train`, `rft-select`): the stage table, the command a
run starts (`stage_command`, shared by the CLIs and the dry runs), the CLI body every stage command calls
(`launch_stage`) and the old flag spellings kept as aliases (`translate_aliases`).

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

import importlib
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@dataclass(frozen=True)
class Stage:
    """A trained stage: the module `python -m` runs (its `__main__` parses the same recipe + overrides), where its
    parser, its training entry and its dry run live ("module:function"), and whether it runs under accelerate."""

    name: str
    module: str
    parse: str
    main: str
    dry_run: str | None = None
    accelerate: bool = True
    aliases: Mapping[str, str] = field(default_factory=dict)  # old flag -> the recipe field's flag
    bool_aliases: Mapping[str, str] = field(default_factory=dict)  # old --flag/--no-flag -> the recipe field's flag

    def resolve(self, what: str) -> Callable[..., Any]:
        module, attr = getattr(self, what).split(":")
        return getattr(importlib.import_module(module), attr)


# the old spellings of `judge train` and `rft-select` (Typer flags before they read recipes): kept as aliases
JUDGE_ALIASES = {"--data": "--dataset_name", "--model": "--model_name_or_path", "--out": "--output_dir",
                 "--max-steps": "--max_steps", "--batch-size": "--per_device_train_batch_size",
                 "--learning-rate": "--learning_rate", "--max-length": "--max_length"}
RFT_ALIASES = {"--model": "--model_name_or_path", "--data": "--dataset_name", "--samples": "--num_generations",
               "--match-steps": "--max_steps", "--match_steps": "--max_steps"}

STAGES: dict[str, Stage] = {
    "sft": Stage("sft", "omnidecision.sft.train", "omnidecision.sft.config:parse_args",
                 "omnidecision.sft.train:main", "omnidecision.sft.dryrun:dry_run"),
    "grpo": Stage("grpo", "omnidecision.rl.train", "omnidecision.rl.config:parse_args",
                  "omnidecision.rl.train:main", "omnidecision.rl.dryrun:dry_run"),
    "judge": Stage("judge train", "omnidecision.rl.judge_train", "omnidecision.rl.judge_config:parse_args",
                   "omnidecision.rl.judge_train:main", "omnidecision.rl.judge_train:dry_run", accelerate=False,
                   aliases=JUDGE_ALIASES,
                   bool_aliases={"--use-cpu": "--use_cpu"}),
    # rft-select parses the GRPO recipe through the GRPO config (the control reads what the arm it controls reads)
    "rft": Stage("rft-select", "omnidecision.rl.rft", "omnidecision.rl.config:parse_args",
                 "omnidecision.rl.rft:main", "omnidecision.rl.dryrun:rft_dry_run", accelerate=False,
                 aliases=RFT_ALIASES),
}
# kept for callers of the old name: the module each stage runs under accelerate
STAGE_MODULES = {name: s.module for name, s in STAGES.items() if s.accelerate}


def translate_aliases(args: Sequence[str], aliases: Mapping[str, str],
                      bool_aliases: Mapping[str, str] | None = None) -> list[str]:
    """`args` with old flag spellings replaced by the recipe field's flag (`--opt v` and `--opt=v` forms);
    `bool_aliases`: `--flag` / `--no-flag` become `--field true|false`.

    >>> translate_aliases(["--max-steps", "4", "--seed=1", "--no-use-cpu"], {"--max-steps": "--max_steps"},
    ...                   {"--use-cpu": "--use_cpu"})
    ['--max_steps', '4', '--seed=1', '--use_cpu', 'false']
    """
    bool_aliases = bool_aliases or {}
    out: list[str] = []
    for arg in args:
        name, eq, value = arg.partition("=")
        if name in aliases:
            out.append(f"{aliases[name]}={value}" if eq else aliases[name])
        elif name in bool_aliases and not eq:
            out += [bool_aliases[name], "true"]
        elif name.startswith("--no-") and "--" + name[5:] in bool_aliases and not eq:
            out += [bool_aliases["--" + name[5:]], "false"]
        else:
            out.append(arg)
    return out


def accelerate_command(stage: str, stage_args: Sequence[str], *, config_file: str | None = None,
                       num_processes: int | None = None, python: str | None = None) -> list[str]:
    """The `accelerate launch` command line that runs `stage` with `stage_args` (recipe and overrides).

    >>> accelerate_command("grpo", ["--config", "r.yaml"], num_processes=8, python="python")[3:6]
    ['--multi_gpu', '--num_processes', '8']
    >>> accelerate_command("grpo", ["--config", "r.yaml"], num_processes=8, python="python")[-4:]
    ['-m', 'omnidecision.rl.train', '--config', 'r.yaml']
    """
    if stage not in STAGE_MODULES:
        raise ValueError(f"no accelerate launch for stage {stage!r} (known: {sorted(STAGE_MODULES)})")
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"--num-processes must be >= 1, got {num_processes}")
    cmd = [python or sys.executable, "-m", "accelerate.commands.launch"]
    if config_file is not None:
        cmd += ["--config_file", str(config_file)]
    elif num_processes is not None and num_processes > 1:
        cmd += ["--multi_gpu"]  # without a config file: plain data parallel (DDP)
    if num_processes is not None:
        cmd += ["--num_processes", str(num_processes)]
    return [*cmd, "-m", STAGE_MODULES[stage], *stage_args]


def stage_command(stage: str, stage_args: Sequence[str], *, accelerate_config: str | None = None,
                  num_processes: int | None = None, python: str | None = None) -> list[str]:
    """The command a real run of `stage` starts: under `accelerate launch` when asked for, else the stage's module.
    What `--dry-run` prints and what the CLI runs.

    >>> stage_command("judge", ["--config", "j.yaml"], python="python")
    ['python', '-m', 'omnidecision.rl.judge_train', '--config', 'j.yaml']
    """
    spec = STAGES[stage]
    if accelerate_config is not None or num_processes is not None:
        if not spec.accelerate:
            raise ValueError(f"{spec.name} runs in one process: --accelerate-config / --num-processes do not apply")
        return accelerate_command(stage, stage_args, config_file=accelerate_config, num_processes=num_processes,
                                  python=python)
    return [python or sys.executable, "-m", spec.module, *stage_args]


def stage_args(stage: str, config: str | Path, extra: Sequence[str]) -> list[str]:
    """`--config RECIPE` + the overrides, old spellings translated (`translate_aliases`)."""
    spec = STAGES[stage]
    return ["--config", str(config), *translate_aliases(list(extra), spec.aliases, spec.bool_aliases)]


def parse_stage_args(stage: str, args: Sequence[str]) -> tuple[Any, Any, Any]:
    """The typed configs of `stage` from `--config RECIPE` + overrides (TrlParser; unknown keys are errors)."""
    return STAGES[stage].resolve("parse")(list(args))


def launch_stage(stage: str, args: Sequence[str], *, accelerate_config: str | None = None,
                 num_processes: int | None = None, dry_run: bool = False, **options: Any) -> Any:
    """The body of every stage command: `--dry-run` prints the report and exits (0 ok, 2 a check failed); with
    `--accelerate-config` / `--num-processes` the stage's module runs under `accelerate launch` (its exit code);
    else the recipe is parsed here (a bad recipe or override: a usage error naming it) and the stage trains in this
    process, returning what its `main` returns. `options`: the stage's own (non-recipe) options, passed to `main`."""
    import typer

    spec = STAGES[stage]
    args = list(args)
    if dry_run:
        if spec.dry_run is None:
            raise typer.BadParameter(f"{spec.name} has no --dry-run", param_hint="--dry-run")
        from omnidecision.preflight import emit

        raise typer.Exit(emit(spec.resolve("dry_run")(args, accelerate_config=accelerate_config,
                                                      num_processes=num_processes, **options)))
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
    from omnidecision.preflight import PreflightError

    try:
        return spec.resolve("main")(*parsed, **options)
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
    from omnidecision.preflight import check_attention, check_model

    checks = [check_model(model_args.model_name_or_path, "model_name_or_path")]
    if getattr(model_args, "tokenizer_name_or_path", None):
        checks.append(check_model(model_args.tokenizer_name_or_path, "tokenizer_name_or_path"))
    checks.append(check_attention(model_args.attn_implementation))
    return checks


def launch_checks(report: Any, stage: str, args: Sequence[str], training: Any, *,
                  accelerate_config: str | None = None, num_processes: int | None = None) -> None:
    """The checks every trained stage's dry run ends with (tracking, output_dir, resume, the accelerate config) and
    the command the real run starts (`stage_command`)."""
    from omnidecision.preflight import check_accelerate_config, check_folder, check_resume, check_tracking

    report.checks.append(check_tracking(training.report_to))
    report.checks.append(check_folder(training.output_dir, "output_dir", must_exist=False))
    if hasattr(training, "resume_from_checkpoint"):
        report.checks.append(check_resume(training.resume_from_checkpoint, training.output_dir))
    report.checks.append(check_accelerate_config(accelerate_config))
    report.would_run = [render(stage_command(stage, args, accelerate_config=accelerate_config,
                                             num_processes=num_processes))]
