"""CLI of the on-policy stage, mounted by `omnidecision.cli`:

    omnidecision rounds --config configs/rounds/tiny-cpu.yaml [--rounds 3 --sft_steps 100]
    omnidecision rounds --config configs/rounds/tiny-cpu-rl.yaml [--rounds 2 --grpo_steps 30]
    omnidecision rounds --config configs/rounds/tiny-cpu.yaml --dry-run
"""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from omnidecision.onpolicy.dryrun import rounds_dry_run
from omnidecision.onpolicy.loop import rounds_cmd
from omnidecision.preflight import emit
from omnidecision.rollout.recipe import RecipeError, cli_overrides


def rounds(ctx: typer.Context,
           config: Path = typer.Option(..., "--config", "-c", help="YAML recipe (configs/rounds/*.yaml)"),
           dry_run: bool = typer.Option(False, "--dry-run", help="resolve the recipe, check round 1's eval (model, "
                                                                "tasks, endpoints), the data and stage recipes "
                                                                "every round reads; print the report, run nothing")
           ) -> None:
    """On-policy rounds: serve the planner, collect on the training tasks, keep what the planner decided in its own
    judge-correct runs (labeller: own, the default; `rule` relabels with the rule planner, a named upper bound),
    aggregate, fine-tune; or with `mode: rl` run GRPO on every state it visited. Resumable per round; any recipe
    field: --key.path VALUE."""
    if dry_run:
        raise typer.Exit(emit(rounds_dry_run(config, cli_overrides(ctx.args))))
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        rounds_cmd(ctx, config)
    except (RecipeError, ValueError, RuntimeError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


rounds.passthrough = True  # type: ignore[attr-defined]
