"""The rounds loop: `omnidecision rounds --config configs/rounds/tiny-cpu.yaml` (or `tiny-cpu-rl.yaml`).

Runs every round of a rounds recipe in turn (a finished round, its `round.json` there, is skipped on a restart):
the SFT variant (`rounds.run_round`: fine-tune on the planner's own judge-correct runs, or relabelled states) or,
with `mode: rl`, the RL variant (`rl_round.run_rl_round`: GRPO on every ledger state it visited). It sits above both
so that neither imports the other (tests/architecture: no import circles).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omnidecision.onpolicy.rl_round import check_rl_recipe, run_rl_round
from omnidecision.onpolicy.rounds import RoundsRecipe, build_labeller, finished_round, load_rounds_recipe, run_round
from omnidecision.outputs import write_json_atomic
from omnidecision.rollout.recipe import cli_overrides

logger = logging.getLogger(__name__)


def run_rounds(recipe: RoundsRecipe) -> dict[str, Any]:
    """All rounds (done ones are skipped); returns and writes `out/rounds.json`."""
    labeller = build_labeller(recipe)  # built before round 1 (the dry run builds it too): a bad spec stops here
    if recipe.mode == "rl":
        check_rl_recipe(recipe)
    model, done = recipe.start_model, []
    for r in range(1, recipe.rounds + 1):
        if (info := finished_round(recipe, r)) is not None:  # its round.json: the one mark of a done round
            logger.info("round %d already done (%s): skipped", r, Path(recipe.out) / f"round-{r}" / "round.json")
        elif recipe.mode == "rl":
            info = run_rl_round(recipe, r, model)
        else:
            info = run_round(recipe, r, model, labeller)
        data = info.get("relabel") or info.get("own_states") or {}
        logger.info("round %d: the served planner scored %s on the training tasks; %s states kept",
                    r, info["accuracy_on_train_tasks"], data.get("states"))
        done.append(info)
        model = info["model"]
    summary = {"rounds": done, "final_model": model, "recipe": recipe.model_dump(mode="json")}
    Path(recipe.out).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(recipe.out) / "rounds.json", summary)
    return summary


def rounds_cmd(ctx: Any, config: Path) -> None:  # mounted by omnidecision.onpolicy.cli
    recipe = load_rounds_recipe(config, cli_overrides(ctx.args))
    summary = run_rounds(recipe)
    keys = ("round", "accuracy_on_train_tasks", "aggregate_train_rows", "own_states")
    print(json.dumps({"final_model": summary["final_model"],
                      "rounds": [{k: r[k] for k in keys if k in r} for r in summary["rounds"]]}, indent=1))
