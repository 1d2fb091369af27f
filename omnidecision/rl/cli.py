"""`omnidecision grpo --config RECIPE.yaml [--field value ...]`: closure-aligned GRPO of the planner.

Unknown options are TrlParser overrides of the recipe (e.g. `--max_steps 20 --learning_rate 1e-4`).
`--accelerate-config FILE` / `--num-processes N` run the same recipe under `accelerate launch` (one process per
GPU); `--dry-run` resolves and checks everything and prints the configuration and the command, starting nothing.

    omnidecision grpo --config configs/grpo/tiny-cpu.yaml --max_steps 20
    omnidecision grpo --accelerate-config configs/accelerate/zero3.yaml \
        --config configs/grpo/qwen3-8b-vllm-colocate.yaml
    omnidecision grpo --config configs/grpo/qwen3-8b-lora-vllm-server.yaml --dataset_name data/harvest/rl --dry-run
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple

import typer

from omnidecision.launch import (
    AccelerateConfigOption,
    DryRunOption,
    NumProcessesOption,
    Stage,
    launch_stage,
    stage_args,
)
from omnidecision.rl.dryrun import dry_run as check

# the recipe option of both GRPO entries (`grpo` here, `grpo-agent` in grounding/grpo_cli.py)
GRPORecipeOption = Annotated[str, typer.Option("--config", help="GRPO recipe (configs/grpo/*.yaml).")]


class GRPOEntry(NamedTuple):
    """What a GRPO command launches: the stage, its training entry and its dry run."""

    stage: Stage
    main: Callable[..., Any]
    check: Callable[..., Any]


def grpo_command(load: Callable[[], GRPOEntry], keys: tuple[str, ...], help: str) -> Callable[..., None]:
    """A GRPO command (`grpo` here, `grpo-agent` in grounding/grpo_cli.py): the same options, the recipe run by
    `launch_stage`, then the report's `keys` and held-out closure printed (`grpo_summary`). `load` imports the stage
    when the command runs, so --help stays fast; `help` is the command's help, a literal where the command is
    assigned (`omnidecision --help` reads it from the source: cli.source_help)."""

    def command(
        ctx: typer.Context,
        config: GRPORecipeOption,
        accelerate_config: AccelerateConfigOption = None,
        num_processes: NumProcessesOption = None,
        dry_run: DryRunOption = False,
    ) -> None:
        entry = load()
        report = launch_stage(entry.stage, stage_args(entry.stage, config, ctx.args), main=entry.main,
                              check=entry.check, accelerate_config=accelerate_config, num_processes=num_processes,
                              dry_run=dry_run)
        print(grpo_summary(report, keys))

    command.__doc__ = help
    command.passthrough = True  # type: ignore[attr-defined]
    return command


def _closure_grpo() -> GRPOEntry:
    from omnidecision.rl.config import GRPO_STAGE  # heavy: the GRPO recipe's dataclasses load trl; keeps --help fast
    from omnidecision.rl.train import main  # heavy: loads torch/trl; keeps --help fast

    return GRPOEntry(GRPO_STAGE, main, check)


def grpo_summary(report: dict[str, Any], keys: tuple[str, ...]) -> str:
    """What a GRPO entry prints: the report's `keys` (those it has) and the start and trained planners' held-out
    closure reward (when the run evaluated them), as JSON."""
    summary = {k: report[k] for k in keys if k in report}
    for key in ("start", "trained"):
        if report.get(key):
            summary[key] = report[key]["closure"]
    return json.dumps(summary, indent=2)


grpo = grpo_command(_closure_grpo, ("steps", "train_seconds", "delta_mean"), help=(
    "GRPO from an SFT checkpoint or adapter on harvested RL states; writes output_dir/closure_eval.json."))
