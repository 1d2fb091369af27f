"""Pool the starts of earlier experiment result files with a new run's: one result, its intervals over all starts.

    omnidecision experiment --starts 2 --out runs/exp-start2 --pool-with docs/results/experiment.json \
        --results docs/results/experiment.json

An experiment's starts are independent (own suites, teacher draws, SFT, RL replicates), so a start run later, or on
another machine, joins the pool as it is; what may not differ is the protocol. `merge_results` refuses files whose
recipes differ in anything but `starts` and `checks`, or that share a start, and records where each start came from
(`pooled_from`: file, starts, code revision, CPU). Everything derived (pooled accuracy, the paired tables, the
planned contrasts' hierarchical intervals, the forest plot) is recomputed from the per-task outcomes; per-family
accuracy is weighted by each file's family counts and decision rates by their states and events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnidecision.pipeline.decisions import merge_rates
from omnidecision.pipeline.experiment import ExperimentRecipe, derived

# the per-start parts of a result: lists aligned with "seeds", and dicts keyed by the start
PER_START_LISTS = ("judge_eval", "wall_s", "provenance")
PER_START_DICTS = ("per_seed_paired", "budget", "serving_parity")
# recipe fields that may differ between pooled files (which starts, where the one-off checks ran)
MAY_DIFFER = {"starts", "checks"}


class MergeError(ValueError):
    """Result files that cannot be pooled (a shared start, a different protocol); says which file and field."""


def read_result(path: Path) -> dict[str, Any]:
    """An experiment result file, or MergeError naming the file and what is wrong with it."""
    import json

    try:
        res = json.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise MergeError(f"{path}: cannot read it ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise MergeError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    keys = res if isinstance(res, dict) else {}
    missing = [k for k in ("seeds", "recipe", "outcomes", "per_seed_accuracy") if k not in keys]
    if missing:
        raise MergeError(f"{path}: not an experiment result (no {', '.join(missing)})")
    return res


def check_compatible(results: list[tuple[str, dict[str, Any]]]) -> None:
    """Raise MergeError naming the file and the recipe fields when two results may not be pooled."""
    # a field added to the recipe later reads, in an older file, as its default: a new field's default is the
    # protocol that ran before it existed (oracle_switch_copies: 1 = no copies)
    defaults = {k: f.get_default(call_default_factory=True) for k, f in ExperimentRecipe.model_fields.items()
                if not f.is_required()}

    def protocol(recipe: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in {**defaults, **recipe}.items() if k not in MAY_DIFFER}

    (first_name, first), *rest = results
    seen = {s: first_name for s in first["seeds"]}
    base = protocol(first.get("recipe") or {})
    for name, res in rest:
        if "recipe" not in res:
            raise MergeError(f"{name}: no `recipe` in the result (not written by `omnidecision experiment`)")
        other = protocol(res["recipe"])
        diff = sorted(k for k in base.keys() | other.keys() if base.get(k) != other.get(k))
        if diff:
            shown = "; ".join(f"{k}: {base.get(k)!r} vs {other.get(k)!r}" for k in diff)
            raise MergeError(f"{name}: its recipe differs from {first_name}'s in {shown}")
        for s in res["seeds"]:
            if s in seen:
                raise MergeError(f"{name}: start {s} is also in {seen[s]} (a start is pooled once)")
            seen[s] = name
        if res.get("test_tasks_per_seed") != first.get("test_tasks_per_seed"):
            raise MergeError(f"{name}: test_tasks_per_seed {res.get('test_tasks_per_seed')} vs "
                             f"{first.get('test_tasks_per_seed')} in {first_name}")


def merge_results(results: list[tuple[str, dict[str, Any]]], recipe: Any, plot: Path | None = None) -> dict[str, Any]:
    """One pooled result from `(name, result)` pairs (each written by `pool`), recomputing what is derived."""
    check_compatible(results)
    arms = list(results[0][1]["per_seed_accuracy"])
    for name, res in results[1:]:
        if list(res["per_seed_accuracy"]) != arms:
            raise MergeError(f"{name}: arms {list(res['per_seed_accuracy'])} vs {arms}")
    merged: dict[str, Any] = {"seeds": [s for _, r in results for s in r["seeds"]]}
    merged["per_seed_accuracy"] = {n: [a for _, r in results for a in r["per_seed_accuracy"][n]] for n in arms}
    for key in PER_START_LISTS:
        merged[key] = [v for _, r in results for v in r.get(key) or [None] * len(r["seeds"])]
    for key in PER_START_DICTS:
        merged[key] = {k: v for _, r in results for k, v in (r.get(key) or {}).items()}
    merged["per_replicate_accuracy"] = {n: {k: v for _, r in results
                                            for k, v in r["per_replicate_accuracy"][n].items()} for n in arms}
    merged["outcomes"] = {n: {k: v for _, r in results for k, v in r["outcomes"][n].items()} for n in arms}
    merged["pooled_by_family"] = _families([r for _, r in results], arms)
    merged["decisions"] = {n: merge_rates([(None, r["decisions"][n]) for _, r in results if r["decisions"].get(n)])
                           for n in arms}
    # a file that was itself pooled keeps its own sources
    merged["pooled_from"] = [src for name, r in results for src in r.get("pooled_from") or [
        {"file": name, "starts": r["seeds"], "git_revision": _revisions(r),
         "cpu": sorted({(p or {}).get("cpu") or "?" for p in r.get("provenance") or [{}]})}]]
    merged["test_tasks_per_seed"] = results[0][1].get("test_tasks_per_seed")
    recipe = recipe.model_copy(update={"starts": merged["seeds"]})
    return derived(merged, arms, recipe, plot)


def _revisions(res: dict[str, Any]) -> str | None:
    """The code revision(s) the file's starts ran at (their plans' provenance), else the one that pooled them."""
    ran = sorted({p["git_revision"] for p in res.get("provenance") or [] if p and p.get("git_revision")})
    return ", ".join(ran) if ran else res.get("git_revision")


def _families(results: list[dict[str, Any]], arms: list[str]) -> dict[str, Any]:
    tally: dict[str, dict[str, list[float]]] = {}
    for res in results:
        for fam, cells in res.get("pooled_by_family", {}).items():
            for n in arms:
                if cells.get(n) is not None:
                    t = tally.setdefault(fam, {}).setdefault(n, [0.0, 0])
                    t[0] += cells[n] * cells["n"]
                    t[1] += cells["n"]
    return {fam: {n: round(c / k, 4) if k else None for n, (c, k) in cells.items()}
            | {"n": max(k for _, k in cells.values())} for fam, cells in sorted(tally.items())}
