"""Eval in the loop: a recipe (configs/eval/*.yaml) → trajectories.jsonl → report.json / report.md / plots.

The recipe (`rollout.recipe.EvalRecipe`) is a rollout recipe (tasks, backends, agent, samples, concurrency,
judge, environment, out) plus an optional `serve:` block: vLLM is started for the run (model dir + LoRA
adapters) and the roles listed in `serve.roles` (default: planner) are pointed at it, then it is stopped.
Runs go through the rollout engine's one entry (`rollout.runner.prepare` + `collect`: the same task selection, the live
environment's pre-flight before a server starts, OUT/manifest.json that refuses a second experiment in the folder,
concurrent workers, judge, single-writer append-only store) into OUT/trajectories.jsonl, so a killed eval restarts
where it stopped: finished (task_id, sample) pairs are skipped, a torn last line is dropped. Tasks with annotated
subgoals (OmniGAIA) also get the progress audit of the failed runs (`eval.progress`, string scorer): OUT/progress.md.
One eval per output: the trajectory file's lock (`outputs.exclusive`) is held from before the manifest and any server
to the last report file; a second process on the same --out stops with one line naming the holder.

    omnidecision eval --config configs/eval/synthetic-tiny-vllm.yaml --samples 2
    python -m omnidecision.eval.runner configs/eval/synthetic-tiny-vllm.yaml
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from omnidecision.outputs import exclusive
from omnidecision.preflight import Check
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.records import RunRecord, endpoint_models
from omnidecision.protocol.redaction import redact_text
from omnidecision.rollout.parity import system_prompt_mismatch
from omnidecision.rollout.recipe import (  # the eval recipe is the rollout layer's, so rounds can type theirs with it
    EvalRecipe,
    RecipeError,
    ServeSpec,
    cli_overrides,
    load_recipe,
    recipe_from_dict,
)
from omnidecision.rollout.runner import TaskSelection, prepare, run_rollouts
from omnidecision.rollout.store import load_records
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

TRAJECTORIES = "trajectories.jsonl"
__all__ = ["EvalRecipe", "ServeSpec", "eval_recipe_from_dict", "load_eval_recipe", "maybe_serve", "run_eval"]


# ---------------------------------------------------------------- recipe loading


def eval_recipe_from_dict(data: dict[str, Any], source: str = "<recipe>", overrides: list[str] | None = None
                          ) -> EvalRecipe:
    return recipe_from_dict(data, source, overrides, model=EvalRecipe)


def load_eval_recipe(path: str | Path, overrides: list[str] | None = None) -> EvalRecipe:
    """Read a YAML eval recipe and apply `key.path=value` overrides; errors name the file (and line) and field."""
    return load_recipe(path, overrides, model=EvalRecipe)


# ---------------------------------------------------------------- server


@contextlib.contextmanager
def maybe_serve(recipe: EvalRecipe) -> Iterator[dict[str, BackendSpec]]:
    """Yield the role → BackendSpec map, with the `serve.roles` pointed at a vLLM server started here."""
    specs = dict(recipe.backends)
    local = specs.get("planner")
    if local is not None and local.kind == "local" and (
            why := system_prompt_mismatch(local.model, recipe.agent.planner_system_prompt)):
        logger.warning("train/serve parity: %s", why)
    if recipe.serve is None:
        yield specs
        return
    from omnidecision.serving.vllm_server import VLLMServer

    s = recipe.serve
    if "planner" in s.roles and (why := system_prompt_mismatch(s.model, recipe.agent.planner_system_prompt)):
        logger.warning("train/serve parity: %s", why)
    extra = list(s.extra_args)
    if s.tensor_parallel_size:
        extra += ["--tensor-parallel-size", str(s.tensor_parallel_size)]
    server = VLLMServer(s.model, port=s.port, lora_modules=s.loras, extra_args=extra, served_name=s.served_name,
                        max_model_len=s.max_model_len, max_lora_rank=s.max_lora_rank,
                        startup_timeout_s=s.startup_timeout_s, fresh_cache=s.fresh_cache)
    with server:
        for role in s.roles:
            spec = specs.get(role) or BackendSpec()
            specs[role] = spec.model_copy(update={"kind": "openai", "base_url": server.base_url,
                                                  "model": s.request_name(), "endpoint_kind": "vllm"})
        logger.info("serving %s at %s for roles %s", s.request_name(), server.base_url, s.roles)
        yield specs


def planner_info(specs: dict[str, BackendSpec]) -> dict[str, Any]:
    spec = specs.get("planner") or specs.get("default")
    if spec is None:
        return {"endpoint": None, "model": None}
    if spec.kind != "openai":
        return {"endpoint": None, "model": spec.model or spec.kind, "kind": spec.kind}
    return {"endpoint": spec.base_url, "model": spec.model, "kind": spec.kind}


# ---------------------------------------------------------------- the environment

OFFLINE_NO_TOOLS = "offline: no tools"


def task_format(recipe: EvalRecipe) -> str | None:
    """The registered format of the recipe's task file (`tasks.format`, or what `auto` detects); None when the
    file cannot be read (the task checks name that)."""
    from omnidecision.tasks.loaders import TaskFileError, detect_format

    if recipe.tasks.format != "auto":
        return recipe.tasks.format
    try:
        return detect_format(recipe.tasks.path)
    except (TaskFileError, OSError, ValueError):
        return None


def environment_label(recipe: EvalRecipe) -> str:
    """What every report says about the tools the runs had: "live", "replay", "offline" (a benchmark whose
    offline environment is its own, e.g. the synthetic suite's corpus) or "offline: no tools" (a benchmark that
    needs tools, evaluated offline with `allow_offline`)."""
    from omnidecision.tasks.formats import TASK_FORMATS

    kind = recipe.environment.kind
    fmt = task_format(recipe)
    if kind == "offline" and fmt is not None and TASK_FORMATS[fmt].needs_tools:
        return OFFLINE_NO_TOOLS
    return kind


def environment_problem(recipe: EvalRecipe) -> str | None:
    """Why the recipe may not run as it is (a benchmark that needs tools, in the offline environment, without
    `allow_offline`), else None."""
    if environment_label(recipe) != OFFLINE_NO_TOOLS or recipe.allow_offline:
        return None
    return (f"{recipe.tasks.path}: a {task_format(recipe)} benchmark needs tools (perception over its media, web "
            "search), but environment.kind is offline (text surrogates, no perception model, search over no pages): "
            "its accuracy would be a planner's without evidence. Set environment.kind: live (with its endpoints, "
            "see configs/eval/qwen3-8b-sft.yaml) or replay (configs/eval/omnigaia-replay.yaml), or pass "
            "--allow-offline (recipe field allow_offline: true) to run it anyway, labelled 'offline: no tools'")


# ---------------------------------------------------------------- train/test separation


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
    from omnidecision.provenance import PROVENANCE_FILE, ProvenanceError, read_provenance

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


# ---------------------------------------------------------------- the checklist (the dry run's and the run's)


def environment_checks(recipe: EvalRecipe) -> list[Check]:
    """What the runs' tools will be: a benchmark that needs tools refused offline (unless `allow_offline`, then
    a warning: every report says "offline: no tools"); a live environment is checked by the rollout engine's
    `live_checks` (dry run) and `prepare` (run)."""
    label = environment_label(recipe)
    if (why := environment_problem(recipe)) is not None:
        return [Check(what="environment", status="error", detail=why)]
    if label == OFFLINE_NO_TOOLS:
        return [Check(what="environment", status="warning", detail="offline: no tools (--allow-offline): every "
                                                                   "report says so; not a result on this benchmark")]
    return [] if label == "live" else [Check(what="environment", status="ok", detail=label)]


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


def refuse(checks: list[Check]) -> None:
    """The run's side of a checklist: the first failed check stops it, in the dry run's words."""
    if (failed := next((c for c in checks if c.status == "error"), None)) is not None:
        raise RecipeError(failed.detail)


# ---------------------------------------------------------------- the run


def trajectories_path(out: str | Path, i: int = 0, n: int = 1) -> Path:
    """OUT/trajectories.jsonl, or the engine's shard file name when the eval is sharded (n > 1)."""
    if n > 1:
        from omnidecision.rollout.store import shard_path

        return shard_path(out, i, n)
    return Path(out) / TRAJECTORIES


def record_endpoint_models(out: Path, models: dict[str, list[str]]) -> None:
    """Add the models the endpoints reported to OUT/manifest.json (written by `rollout.runner.prepare`)."""
    import json

    from omnidecision.rollout.store import write_json_atomic

    path = out / "manifest.json"
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return  # no manifest to complete (prepare writes one before any run)
    manifest["endpoint_models"] = models
    write_json_atomic(path, manifest)


def progress_audit(out: Path, records: list[RunRecord], tasks: list[Task]) -> dict[str, Any]:
    """Tasks with annotated subgoals (OmniGAIA): the progress audit of the failed runs with the offline string scorer
    (eval/progress.py) → OUT/progress.json, progress.md, and its headline for the report; else nothing."""
    from omnidecision.eval.progress import StringScorer, audit, subgoals
    from omnidecision.eval.progress_report import write_audit

    if not any(subgoals(t) for t in tasks):
        return {}
    res = audit(records, tasks, StringScorer())
    write_audit(out, res)
    keys = ("scorer", "evidence", "n_scored", "counts", "weighted_progress", "mean_subgoal_fraction", "scorer_errors")
    return {"progress": {**{k: res[k] for k in keys}, "failed_runs": res["runs"]["failed"],
                         "no_subgoals": res["runs"]["no_subgoals"], "file": "progress.md"}}


def run_eval(recipe: EvalRecipe, *, progress: bool = True, specs: dict[str, BackendSpec] | None = None
             ) -> dict[str, Any]:
    """The whole eval: tasks → (server) → runs → report files. Returns the report dict.

    `specs` (role → BackendSpec) replaces the recipe's backends and its `serve:` block (a caller that serves
    one model for several evals, like `ablate`, passes the served specs)."""
    refuse(environment_checks(recipe))  # before anything is written or served
    selection = TaskSelection(recipe)  # the tasks, selected once: the checks below and `prepare` read them
    checks, overlap = overlap_checks(recipe, selection)
    refuse(checks)
    if recipe.prices:  # a broken price table fails now, not after the runs
        from omnidecision.eval.prices import load_prices

        load_prices(recipe.prices)
    # one writer per output: held from before the manifest and any server to the last report file
    i, n = recipe.shard_index
    out = Path(recipe.out)
    out.mkdir(parents=True, exist_ok=True)
    with exclusive(trajectories_path(out, i, n)):
        return _run_eval_locked(recipe, progress=progress, specs=specs, overlap=overlap, selection=selection)


def _run_eval_locked(recipe: EvalRecipe, *, progress: bool, specs: dict[str, BackendSpec] | None,
                     overlap: dict[str, Any], selection: TaskSelection) -> dict[str, Any]:
    """`run_eval` under the lock of its trajectory file: prepare, (serve,) run, report."""
    from omnidecision.eval.report import write_report

    # -- tasks, pre-flight, manifest and services: the rollout engine's (a served role is checked once its server runs)
    served = recipe.serve.roles if specs is None and recipe.serve is not None else ()
    prepared = prepare(recipe, specs, served_roles=served, selection=selection)
    tasks, all_tasks = prepared.tasks, prepared.selected
    if not tasks:
        raise RecipeError(f"{recipe.tasks.path}: no tasks left after the filters")
    i, n = recipe.shard_index
    out = Path(recipe.out)
    recipe_text = yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False)
    (out / "recipe.yaml").write_text(redact_text(recipe_text), "utf-8")  # a header value, a key: protocol/redaction.py
    # -- runs (the server, if any, lives only for this phase)
    t0 = time.perf_counter()
    serving = contextlib.nullcontext(specs) if specs is not None else maybe_serve(recipe)
    with serving as role_specs:
        planner = planner_info(role_specs)
        summary = asyncio.run(run_rollouts(recipe, prepared=prepared, specs=role_specs,
                                           out_file=trajectories_path(out, i, n),
                                           progress=progress and recipe.progress,
                                           desc=f"eval {recipe.name or out.name}"))
    wall = time.perf_counter() - t0
    # -- report over the records of these tasks (a resumed eval reports every finished run)
    ids = {t.id for t in all_tasks}
    records = [r for r in load_records(out) if r.task_id in ids and r.sample < recipe.samples]
    replay = recipe.environment.kind == "replay" or any(t.meta.get("replay") for t in tasks)
    if replay:  # the store's records do not carry the label yet: the environment decides it
        records = [r if r.replay else r.model_copy(update={"replay": True}) for r in records]
    meta = {"name": recipe.name or out.name, "planner": planner, "wall_s": round(wall, 3),
            "new_runs": summary.done, "skipped_runs": summary.skipped,
            "tasks": len(tasks), "samples": recipe.samples,
            "environment": "replay" if replay else environment_label(recipe), "train_overlap": overlap,
            "judge": {"enabled": recipe.judge.enabled, "scorer": recipe.judge.scorer,
                      "llm": recipe.judge.llm.model if recipe.judge.enabled and recipe.judge.llm else None},
            "budgets": {"step_budget": recipe.agent.step_budget, "max_tool_calls": recipe.agent.max_tool_calls}}
    meta["endpoint_models"] = endpoint_models(records)
    record_endpoint_models(out, meta["endpoint_models"])
    meta.update(progress_audit(out, records, all_tasks))
    rep = write_report(out, records, meta, plots=recipe.plots, prices=recipe.prices)
    logger.info("eval %s: accuracy %s over %d runs → %s", meta["name"], rep["accuracy"], rep["n"], out)
    return rep


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config")
    a, extra = p.parse_known_args(argv)  # any recipe field: --key.path VALUE
    logging.basicConfig(level=logging.INFO)
    run_eval(load_eval_recipe(a.config, cli_overrides(extra)))


if __name__ == "__main__":
    main()
