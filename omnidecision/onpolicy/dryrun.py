"""`omnidecision rounds ... --dry-run`: resolve the rounds recipe and its overrides, then check what the rounds will
read: round 1's eval (the served start model, the tasks, the endpoints: `eval`'s own dry run), the SFT folder every
round joins (sft mode) or the state sources mixed in (rl mode), the stage recipes each round runs, and the output
folder; print the report and the rounds a real run starts. Serves nothing, trains nothing, writes nothing.

    omnidecision rounds --config configs/rounds/tiny-cpu.yaml --dry-run
"""

from __future__ import annotations

from pathlib import Path

from omnidecision.eval.dryrun import eval_dry_run
from omnidecision.onpolicy.rounds import RoundsRecipe, load_rounds_recipe
from omnidecision.preflight import Check, DryRunReport, check_folder
from omnidecision.rollout.recipe import RecipeError


def rounds_dry_run(config: Path, overrides: list[str]) -> DryRunReport:
    """The dry-run report of `omnidecision rounds --config CONFIG` with `overrides` (`key.path=value`)."""
    try:
        recipe = load_rounds_recipe(config, overrides)
    except (RecipeError, ValueError, OSError) as exc:
        report = DryRunReport(command="rounds", recipe=str(config))
        report.add("recipe", "error", str(exc))
        return report
    # round 1's eval: the start model served, the training tasks, the endpoints (what every round repeats)
    report = eval_dry_run(recipe.collect, config, len(overrides), command="rounds")
    report.resolved = recipe.model_dump(mode="json")
    round_checks(report, recipe)
    report.would_run = [f"round {r}: serve + eval on the training tasks, "
                        + ("relabel + aggregate + sft" if recipe.mode == "sft" else "harvest states + grpo")
                        + f" -> {Path(recipe.out) / f'round-{r}'}" for r in range(1, recipe.rounds + 1)]
    return report


def round_checks(report: DryRunReport, recipe: RoundsRecipe) -> None:
    """The inputs every round reads beyond its eval: the stage recipes, the data it joins, the output folder."""
    if recipe.mode == "sft":
        report.checks.append(check_folder(recipe.base_sft_data, "base_sft_data"))
        report.checks.append(_file(recipe.sft_config, "sft_config"))
    else:
        report.checks.append(_file(recipe.grpo_config, "grpo_config"))
        for i, source in enumerate(recipe.state_mix):
            report.checks.append(check_folder(str(source.get("path") or ""), f"state_mix[{i}].path"))
        if recipe.judge_refresh and recipe.judge_data:
            report.checks.append(check_folder(recipe.judge_data, "judge_data"))
    out = Path(recipe.out)
    done = sorted(p.name for p in out.glob("round-*")) if out.is_dir() else []
    report.add("out", "ok", f"{out}: resumes after {', '.join(done)}" if done else f"{out} (created by the run)")


def _file(path: str, what: str) -> Check:
    if Path(path).is_file():
        return Check(what=what, status="ok", detail=path)
    return Check(what=what, status="error", detail=f"{path} does not exist")
