"""How one run of the engine goes (`RolloutOptions`): where its records go and the knobs of the run loop, one typed
object that `rollout.runner.run_tasks` takes. A recipe gives one with `RolloutOptions.from_recipe`; tests and
benchmarks build one directly.

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --out runs/synth-teacher   # from_recipe
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.rollout.breaker import BreakerSettings
from omnidecision.rollout.deprecated import aliases
from omnidecision.rollout.output import records_file
from omnidecision.rollout.plan import RolloutPlan
from omnidecision.rollout.recipe import RolloutRecipe


class RolloutOptions(BaseModel):
    """The run loop's options (the recipe fields of the same names; see `RolloutRecipe`)."""

    model_config = ConfigDict(extra="forbid")

    out_file: Path = Field(..., description="the shard file the records are appended to (resumable)")
    samples: int = Field(1, ge=1, description="runs per task")
    concurrency: int = Field(8, ge=1, description="runs in flight at once")
    judge: bool = Field(True, description="judge each run against the task's gold answer")
    judge_scorer: Literal["gaia", "lenient"] = Field(
        "lenient", description="the string scorer of the answer grading (tasks/grading.py)")
    retry_errors: bool = Field(True, description="run again the runs recorded with outcome `error` (records moved "
                                                 "aside first)")
    breaker: BreakerSettings = Field(default_factory=BreakerSettings,
                                     description="the endpoint circuit breaker (`enabled: false`: none)")
    progress: bool = Field(True, description="show a progress bar")
    desc: str = Field("collect", description="the progress bar's label")

    @classmethod
    def from_recipe(cls, recipe: RolloutRecipe, *, out_file: str | Path | None = None, progress: bool | None = None,
                    desc: str | None = None) -> RolloutOptions:
        """The options of a recipe's shard: its shard file under `recipe.out` unless `out_file` is given
        (`output.records_file`, the file a plan names)."""
        return cls.writing(recipe, records_file(recipe, out_file), progress=progress, desc=desc)

    @classmethod
    def from_plan(cls, plan: RolloutPlan, *, progress: bool | None = None, desc: str | None = None
                  ) -> RolloutOptions:
        """The options of a checked plan's run: the trajectory file its checks read (`plan.out_file`)."""
        return cls.writing(plan.recipe, plan.out_file, progress=progress, desc=desc)

    @classmethod
    def writing(cls, recipe: RolloutRecipe, out_file: Path, *, progress: bool | None = None, desc: str | None = None
                ) -> RolloutOptions:
        """The options of `recipe`'s run appending to `out_file`."""
        i, n = recipe.shard_index
        return cls(out_file=Path(out_file),
                   samples=recipe.samples, concurrency=recipe.concurrency, judge=recipe.judge.enabled,
                   judge_scorer=recipe.judge.scorer, retry_errors=recipe.retry_errors, breaker=recipe.breaker,
                   progress=recipe.progress if progress is None else progress, desc=desc or f"collect {i}/{n}")


__getattr__ = aliases(__name__, {"CollectOptions": "RolloutOptions"}, globals())  # the old name, one release
