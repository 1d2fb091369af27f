"""Train/test separation of an eval: the evaluated tasks against the training tasks recorded in the served planner's
provenance (every trained stage writes it, export carries it). One item of the eval's checklist (`eval.checklist`):
an overlap is refused unless `allow_train_overlap`, and the report keeps the figures.

    omnidecision eval --config configs/eval/qwen3-8b-sft.yaml --serve.model runs/export/qwen3-8b-grpo --dry-run
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnidecision.preflight import Check
from omnidecision.provenance import PROVENANCE_FILE, ProvenanceError, read_provenance
from omnidecision.rollout.recipe import EvalRecipe, RecipeError
from omnidecision.rollout.selection import TaskSelection


def planner_folders(recipe: EvalRecipe) -> list[str]:
    """The planner folders the eval runs: what the `serve:` block serves (every LoRA adapter, and the model itself
    unless it is only the hub base the adapters ride on: a local model folder is checked, it may be a trained
    planner), and every model a backend of kind `local` decodes in-process (backends/local.py)."""
    in_process = sorted({spec.model for spec in recipe.backends.values() if spec.kind == "local" and spec.model})
    if recipe.serve is None:
        return in_process
    model = recipe.serve.model
    loras = list(recipe.serve.loras.values())
    return [*([model] if not loras or Path(model).is_dir() else []), *loras, *in_process]


def training_tasks(recipe: EvalRecipe) -> tuple[dict[str, set[str]], dict[str, str], list[str]]:
    """(provenance.json path → the task ids the served planner trained on, path → the stages that trained it,
    the served planner folders with no training tasks recorded: their provenance is unknown). Read through
    `omnidecision.provenance.read_provenance`, which every trained stage writes and export carries."""
    out: dict[str, set[str]] = {}
    stages: dict[str, str] = {}
    unknown: list[str] = []
    for folder in planner_folders(recipe):
        try:
            prov = read_provenance(folder, parents=False)
        except ProvenanceError as exc:
            raise RecipeError(str(exc)) from exc
        if prov is None or prov.training_tasks is None:
            unknown.append(folder)
            continue
        path = str(Path(folder) / PROVENANCE_FILE)
        out[path] = set(prov.training_tasks.ids)
        stages[path] = " ← ".join([prov.stage, *(str(u.get("stage")) for u in prov.lineage.upstream)])
    return out, stages, unknown


def train_overlap(recipe: EvalRecipe, task_ids: set[str] | None = None,
                  selection: TaskSelection | None = None) -> dict[str, Any]:
    """How the evaluated tasks meet the served planner's training tasks: `known` (some provenance lists them),
    `provenance` (and `stages`: which stages trained it), `overlap` (how many evaluated tasks it trained on),
    `examples`, `allowed`, and `no_provenance`: served planner folders whose training tasks are unknown (not
    checked; the dry run warns, the report says so). The evaluated tasks: `task_ids`, else those of `selection` (the
    run's `TaskSelection`, made here when None)."""
    trained, stages, unknown = training_tasks(recipe)
    base = {"no_provenance": unknown, "allowed": recipe.allow_train_overlap}
    if not trained:
        return {"known": False, "provenance": [], "stages": {}, "overlap": 0, "examples": [], **base}
    if task_ids is None:
        task_ids = {t.id for t in (selection or TaskSelection(recipe))()[1]}
    seen = set().union(*trained.values()) & task_ids
    return {"known": True, "provenance": sorted(trained), "stages": stages, "overlap": len(seen),
            "evaluated": len(task_ids), "examples": sorted(seen)[:5], **base}


def overlap_problem(info: dict[str, Any]) -> str | None:
    """Why the eval may not run (its tasks overlap the planner's training tasks, without the flag), else None."""
    if not info["overlap"] or info["allowed"]:
        return None
    where = ", ".join(f"{p} (trained by {info.get('stages', {}).get(p, '?')})" for p in info["provenance"])
    return (f"{info['overlap']} of the {info['evaluated']} evaluated tasks are among the served planner's training "
            f"tasks ({where}), e.g. {info['examples']}: a score on them is not a test. "
            "Evaluate on other tasks (`omnidecision tasks split FILE --folds K --out DIR`, then "
            "--tasks.ids_file DIR/fold-i/test_ids.json), or pass --allow-train-overlap (recipe field "
            "allow_train_overlap: true) to run it anyway, marked in the report")


def overlap_checks(recipe: EvalRecipe, selection: TaskSelection) -> tuple[list[Check], dict[str, Any]]:
    """Train/test separation: the evaluated tasks (`selection`) against the training tasks in the served planner's
    provenance; the checks and the figures the report keeps (`train_overlap`). Raises RecipeError when the tasks or
    a provenance cannot be read."""
    info = train_overlap(recipe, selection=selection)
    checks: list[Check] = []
    if info["no_provenance"]:
        checks.append(Check(what="provenance", status="warning", detail=(
            f"no provenance for the served planner {', '.join(info['no_provenance'])} (no provenance.json with "
            "training_tasks): what it was trained on is unknown, so train/test separation is NOT checked for it; "
            "serve a folder that `omnidecision export` wrote from a trained stage")))
    if not info["known"]:
        if recipe.serve is None:
            checks.append(Check(what="train/test", status="ok", detail="the planner is the recipe's endpoint (no "
                                                                       "served folder): its training tasks are not "
                                                                       "known here"))
        else:
            checks.append(Check(what="train/test", status="warning", detail="not checked: no served planner has "
                                                                            "recorded training tasks"))
    elif (why := overlap_problem(info)) is not None:
        checks.append(Check(what="train/test", status="error", detail=why))
    elif info["overlap"]:
        checks.append(Check(what="train/test", status="warning", detail=f"{info['overlap']} evaluated tasks are "
                                                                        "training tasks (--allow-train-overlap): the "
                                                                        "report marks it"))
    else:
        checks.append(Check(what="train/test", status="ok", detail=f"none of the {info['evaluated']} evaluated tasks "
                                                                   "is a training task"))
    return checks, info


