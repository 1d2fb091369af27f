"""`omnidecision rounds ... --dry-run`: resolve the rounds recipe and its overrides, then check what the rounds will
read: the first round's eval as the run builds it (`rounds.round_collect_recipe`: the planner it serves, written to
`round-r/collect`, its own training tasks allowed; `eval`'s own dry run), the labeller backend the run builds
(`rounds.build_labeller`), the SFT folder every round joins (sft mode) or the GRPO recipe and the state sources
(rl mode: `rl_round.check_rl_recipe`, the run's own check), the stage recipes each round runs, and the output
folder with the rounds already done (`rounds.finished_round`: their round.json); print the report and the rounds a
real run starts. Serves nothing, trains nothing, writes nothing.

    omnidecision rounds --config configs/rounds/tiny-cpu.yaml --dry-run
"""

from __future__ import annotations

from pathlib import Path

from omnidecision.eval.dryrun import eval_dry_run
from omnidecision.onpolicy.rl_round import check_rl_recipe
from omnidecision.onpolicy.rounds import (
    RoundsRecipe,
    build_labeller,
    load_rounds_recipe,
    next_round,
    round_collect_recipe,
)
from omnidecision.preflight import Check, DryRunReport, check_folder
from omnidecision.rollout.recipe import RecipeError


def rounds_dry_run(config: Path, overrides: list[str]) -> DryRunReport:
    """The dry-run report of `omnidecision rounds --config CONFIG` with `overrides` (`key.path=value`)."""
    try:
        recipe = load_rounds_recipe(config, overrides)
        done, first, model = next_round(recipe)
    except (RecipeError, ValueError, OSError) as exc:
        report = DryRunReport(command="rounds", recipe=str(config))
        report.add("recipe", "error", str(exc))
        return report
    out = Path(recipe.out)
    if first is None:  # every round done: the run serves nothing and only rewrites rounds.json
        report = DryRunReport(command="rounds", recipe=str(config))
    else:  # the first round the run starts: its eval, as the run builds it (served model, out, overlap allowed)
        report = eval_dry_run(round_collect_recipe(recipe, model, out / f"round-{first}" / "collect"), config,
                              len(overrides), command="rounds")
    report.resolved = recipe.model_dump(mode="json")
    round_checks(report, recipe, done)
    report.would_run = [f"round {r}: skipped (done: {out / f'round-{r}' / 'round.json'})" if r in done else
                        f"round {r}: serve + eval on the training tasks, "
                        + ("relabel + aggregate + sft" if recipe.mode == "sft" else "harvest states + grpo")
                        + f" -> {out / f'round-{r}'}" for r in range(1, recipe.rounds + 1)]
    return report


def round_checks(report: DryRunReport, recipe: RoundsRecipe, done: list[int]) -> None:
    """The inputs every round reads beyond its eval: the labeller, the stage recipes, the data it joins, the output
    folder and its done rounds (`done`)."""
    try:
        build_labeller(recipe)
    except ValueError as exc:
        report.checks.append(_refusal(exc, "labeller"))
    if recipe.mode == "sft":
        report.checks.append(check_folder(recipe.base_sft_data, "base_sft_data"))
        report.checks.append(_file(recipe.sft_config, "sft_config"))
    else:
        report.checks.append(grpo := _file(recipe.grpo_config, "grpo_config"))
        if grpo.status == "ok":
            try:
                check_rl_recipe(recipe)  # the run's check before round 1: a refreshed judge needs a judge recipe
            except (RecipeError, ValueError, OSError) as exc:
                report.checks.append(_refusal(exc, "grpo_config"))
        for i, source in enumerate(recipe.state_mix):
            report.checks.append(check_folder(str(source.get("path") or ""), f"state_mix[{i}].path"))
        if recipe.judge_refresh and recipe.judge_data:
            report.checks.append(check_folder(recipe.judge_data, "judge_data"))
    out = Path(recipe.out)
    started = [f"round-{r}" for r in range(1, recipe.rounds + 1) if r not in done and (out / f"round-{r}").is_dir()]
    detail = f"{out}: resumes after {', '.join(f'round-{r}' for r in done)}" if done else \
        f"{out} (created by the run)" if not out.exists() else f"{out}: no round done yet"
    if started:  # a folder is not a done round: only round.json is (what the run's loop reads)
        detail += f"; {', '.join(started)} started, not done (no round.json): run again, its collection resuming"
    report.add("rounds out", "ok", detail)  # "out" is the eval's: the round's collect folder


def _refusal(exc: Exception, what: str) -> Check:
    """A refusal of the run as a failed check, printed in the run's words: the run says `error: {exc}`, the report
    `error: {what}: {detail}`, so a message that starts with a field name (`judge_refresh: ...`) is split there."""
    head, sep, rest = str(exc).partition(": ")
    if sep and head.replace("_", "").isalnum():
        return Check(what=head, status="error", detail=rest)
    return Check(what=what, status="error", detail=str(exc))


def _file(path: str, what: str) -> Check:
    if Path(path).is_file():
        return Check(what=what, status="ok", detail=path)
    return Check(what=what, status="error", detail=f"{path} does not exist")
