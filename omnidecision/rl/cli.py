"""`omnidecision grpo --config RECIPE.yaml [--field value ...]`: closure-aligned GRPO of the planner.

Unknown options are TrlParser overrides of the recipe (e.g. `--max_steps 20 --learning_rate 1e-4`).
"""

from __future__ import annotations

import json
import logging

import typer


def grpo(
    ctx: typer.Context,
    config: str = typer.Option(..., "--config", help="GRPO recipe (configs/grpo/*.yaml)."),
) -> None:
    """GRPO from an SFT checkpoint or adapter on harvested RL states; writes output_dir/closure_eval.json."""
    from omnidecision.rl.config import parse_args
    from omnidecision.rl.train import main

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        args = parse_args(["--config", config, *ctx.args])
    except (ValueError, FileNotFoundError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    report = main(*args)
    summary = {k: report[k] for k in ("steps", "train_seconds", "delta_mean")}
    for key in ("start", "trained"):
        if report.get(key):
            summary[key] = report[key]["closure"]
    print(json.dumps(summary, indent=2))


grpo.passthrough = True  # type: ignore[attr-defined]
