"""`rl.cli.grpo_command`, the one builder of the GRPO commands (`grpo`, `grpo-agent`): the stage it loads is parsed
and trained with the command's recipe and overrides, the report's keys are printed, and both shipped commands get the
same options and forward unknown ones.

    .venv/bin/pytest -q tests/rl/test_grpo_command.py
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from omnidecision.grounding.grpo_cli import grpo_agent
from omnidecision.launch import Stage
from omnidecision.rl.cli import GRPOEntry, grpo, grpo_command


def _app(command: Any) -> typer.Typer:
    app = typer.Typer()
    app.command("go", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(command)
    return app


def test_the_loaded_stage_trains_on_the_recipe_and_the_keys_are_printed(tmp_path: Path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("max_steps: 1\n")
    seen: dict[str, Any] = {}

    def parse(args: list[str]) -> tuple[Any, Any, Any]:
        seen["args"] = args
        return "script", "training", "model"

    def main(*parsed: Any) -> dict[str, Any]:
        seen["parsed"] = parsed
        return {"steps": 3, "delta_mean": 0.5, "ignored": 1, "trained": {"closure": {"mean": 0.7}}}

    command = grpo_command(lambda: GRPOEntry(Stage("toy", "toy.module", parse), main, lambda *a, **k: None),
                           ("steps", "delta_mean"), help="A toy GRPO stage.")
    res = CliRunner().invoke(_app(command), ["--config", str(recipe), "--max_steps", "2"])
    assert res.exit_code == 0, res.output
    assert seen == {"args": ["--config", str(recipe), "--max_steps", "2"], "parsed": ("script", "training", "model")}
    assert json.loads(res.output) == {"steps": 3, "delta_mean": 0.5, "trained": {"mean": 0.7}}
    assert command.__doc__ == "A toy GRPO stage." and command.passthrough  # type: ignore[attr-defined]


def test_both_grpo_commands_share_their_options():
    assert typing.get_type_hints(grpo, include_extras=True) == typing.get_type_hints(grpo_agent, include_extras=True)
    assert grpo.passthrough and grpo_agent.passthrough  # type: ignore[attr-defined]
    assert grpo.__doc__ != grpo_agent.__doc__
