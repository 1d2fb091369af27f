"""The eval's environment: what every report says about the tools the runs had ("live", "replay", "offline", or
"offline: no tools" for a benchmark that needs tools evaluated offline), and the check that refuses the last one
unless `allow_offline`. One item of the eval's checklist (`eval.checklist`).

    omnidecision eval --config configs/eval/omnigaia-replay.yaml --dry-run
"""

from __future__ import annotations

from omnidecision.preflight import Check
from omnidecision.rollout.recipe import EvalRecipe
from omnidecision.tasks.formats import TASK_FORMATS
from omnidecision.tasks.loaders import TaskFileError, detect_format

OFFLINE_NO_TOOLS = "offline: no tools"
NEEDS_TOOLS = ("{path}: a {fmt} benchmark needs tools (perception over its media, web search), but environment.kind "
               "is offline (text surrogates, no perception model, search over no pages): its accuracy would be a "
               "planner's without evidence. Set environment.kind: live (with its endpoints, see "
               "configs/eval/qwen3-8b-sft.yaml) or replay (configs/eval/omnigaia-replay.yaml), or pass "
               "--allow-offline (recipe field allow_offline: true) to run it anyway, labelled 'offline: no tools'")


def task_format(recipe: EvalRecipe) -> str | None:
    """The registered format of the recipe's task file (`tasks.format`, or what `auto` detects); None when the
    file cannot be read (the task checks name that)."""
    if recipe.tasks.format != "auto":
        return recipe.tasks.format
    try:
        return detect_format(recipe.tasks.path)
    except (TaskFileError, OSError, ValueError):
        return None


def label_and_checks(recipe: EvalRecipe) -> tuple[str, list[Check]]:
    """The environment's label (`environment_label`) and its check: a benchmark that needs tools is refused
    offline (unless `allow_offline`, then a warning: every report says "offline: no tools"); a live environment is
    checked by the rollout engine's `environment_checks`, in the plan its dry run prints and its run refuses on."""
    kind = recipe.environment.kind
    fmt = task_format(recipe)  # read once: the label and the refusal's words both name it
    if not (kind == "offline" and fmt is not None and TASK_FORMATS[fmt].needs_tools):
        return kind, [] if kind == "live" else [Check(what="environment", status="ok", detail=kind)]
    if recipe.allow_offline:
        return OFFLINE_NO_TOOLS, [Check(what="environment", status="warning", detail="offline: no tools "
                                        "(--allow-offline): every report says so; not a result on this benchmark")]
    return OFFLINE_NO_TOOLS, [Check(what="environment", status="error", detail=NEEDS_TOOLS.format(
        path=recipe.tasks.path, fmt=fmt))]


def environment_label(recipe: EvalRecipe) -> str:
    """What every report says about the tools the runs had: "live", "replay", "offline" (a benchmark whose
    offline environment is its own, e.g. the synthetic suite's corpus) or "offline: no tools" (a benchmark that
    needs tools, evaluated offline with `allow_offline`)."""
    return label_and_checks(recipe)[0]


def environment_problem(recipe: EvalRecipe) -> str | None:
    """Why the recipe may not run as it is (a benchmark that needs tools, in the offline environment, without
    `allow_offline`), else None."""
    return next((c.detail for c in label_and_checks(recipe)[1] if c.status == "error"), None)


def environment_checks(recipe: EvalRecipe) -> list[Check]:
    """The checks of `label_and_checks` alone."""
    return label_and_checks(recipe)[1]
