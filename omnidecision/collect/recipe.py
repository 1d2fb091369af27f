"""Collect's recipe: the rollout recipe (`rollout.recipe.RolloutRecipe`) of a collection recorded for training, read
from configs/collect/*.yaml (`load_recipe(path, overrides, model=CollectRecipe)`).

    python -c "from omnidecision.collect.recipe import CollectRecipe; from omnidecision.rollout.recipe import \
        load_recipe; print(load_recipe('configs/collect/synthetic-teacher.yaml', model=CollectRecipe).out)"
"""

from __future__ import annotations

from pydantic import Field

from omnidecision.rollout.recipe import RolloutRecipe


class CollectRecipe(RolloutRecipe):
    """A collection (`omnidecision collect`): rollouts of the agent over a task set, recorded for training (harvest
    reads them); every field is the rollout recipe's."""

    out: str = Field("runs/collect", description="output folder: trajectories.shard-i-of-n.jsonl, manifest.json")
