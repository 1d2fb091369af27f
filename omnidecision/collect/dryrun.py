"""`omnidecision collect ... --dry-run`: resolve the recipe and its overrides (`${VAR}` expanded), then the checks
every rollout recipe gets (`rollout.checks`: tasks and this shard's share, the backends' endpoints, the output
folder; with a live environment every endpoint asked and every media file looked for), print the resolved recipe;
run no agent, write nothing.

    omnidecision collect --config configs/collect/omnigaia-replay-api.yaml --shard 0/4 --out runs/collect --dry-run
"""

from __future__ import annotations

from pathlib import Path

from omnidecision.preflight import DryRunReport
from omnidecision.rollout.checks import live_checks, recipe_checks
from omnidecision.rollout.recipe import RecipeError, load_recipe


def dry_run(config: Path | None, overrides: list[str]) -> DryRunReport:
    report = DryRunReport(command="collect", recipe=str(config) if config else None)
    try:
        recipe = load_recipe(config, overrides)
    except (RecipeError, ValueError) as exc:
        # an unset-variables error lists every variable ("...: a; b; c"): one failed check each
        head, sep, rest = str(exc).partition(": ")
        items = rest.split("; ") if sep and "environment variable" in rest else [str(exc)]
        for item in items:
            report.add("recipe", "error", item)
        return report
    report.add("recipe", "ok", f"{config} + {len(overrides)} override(s)")
    report.resolved = recipe.model_dump(mode="json")
    recipe_checks(report, recipe)
    live_checks(report, recipe)
    return report
