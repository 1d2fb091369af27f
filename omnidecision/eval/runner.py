"""Eval in the loop: a recipe (configs/eval/*.yaml) → trajectories.jsonl → report.json / report.md / plots.

The recipe is a collect recipe (`omnidecision.collect.recipe`: tasks, backends, agent, samples, concurrency,
judge, environment, out) plus an optional `serve:` block: vLLM is started for the run (model dir + LoRA
adapters) and the roles listed in `serve.roles` (default: planner) are pointed at it, then it is stopped.
Runs go through collect's runner (`collect_runs`: concurrent workers, judge, single-writer append-only store) into
OUT/trajectories.jsonl, so a killed eval restarts where it stopped: finished (task_id, sample) pairs are skipped,
a torn last line is dropped.

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
from pydantic import BaseModel, ConfigDict, Field

from omnidecision.collect.parity import system_prompt_mismatch
from omnidecision.collect.recipe import CollectRecipe, RecipeError, cli_overrides, load_recipe, recipe_from_dict
from omnidecision.collect.store import read_records
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.records import RunRecord

logger = logging.getLogger(__name__)

TRAJECTORIES = "trajectories.jsonl"


class ServeSpec(BaseModel):
    """Start vLLM for the eval and point roles at it."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(..., description="merged checkpoint (or the base model when serving adapters)")
    loras: dict[str, str] = Field(default_factory=dict, description="adapter name -> folder (--lora-modules)")
    served_name: str | None = Field(None, description="name of the base model on the server (default: folder name)")
    planner_model: str | None = Field(
        None, description="model name the served roles request (default: the only LoRA, else the base name)")
    roles: list[str] = Field(default_factory=lambda: ["planner"], description="roles pointed at the server")
    port: int | None = Field(None, description="port (default: a free one)")
    max_model_len: int | None = Field(4096, description="--max-model-len")
    tensor_parallel_size: int | None = Field(None, ge=1, description="--tensor-parallel-size (GPUs)")
    max_lora_rank: int | None = Field(
        None, ge=1, description="--max-lora-rank (default: the adapters' largest rank, from adapter_config.json)")
    extra_args: list[str] = Field(default_factory=list, description="more vLLM server arguments, verbatim")
    fresh_cache: bool = Field(False, description="a private vLLM compile cache deleted on stop (default: persistent)")
    startup_timeout_s: float = Field(300.0, gt=0, description="seconds to wait for /v1/models")

    def request_name(self) -> str:
        if self.planner_model:
            return self.planner_model
        if len(self.loras) == 1:
            return next(iter(self.loras))
        return self.served_name or Path(self.model).name


class EvalRecipe(CollectRecipe):
    name: str | None = Field(None, description="label of this eval in reports and comparisons")
    out: str = Field("runs/eval", description="output folder: trajectories.jsonl, report.json, report.md, *.png")
    serve: ServeSpec | None = Field(None, description="start vLLM for the run (see ServeSpec)")
    plots: bool = Field(True, description="write PNG plots next to the report")


# ---------------------------------------------------------------- recipe loading


def eval_recipe_from_dict(data: dict[str, Any], source: str = "<recipe>", overrides: list[str] | None = None
                          ) -> EvalRecipe:
    return recipe_from_dict(data, source, overrides, model=EvalRecipe)  # type: ignore[return-value]


def load_eval_recipe(path: str | Path, overrides: list[str] | None = None) -> EvalRecipe:
    """Read a YAML eval recipe and apply `key.path=value` overrides; errors name the file (and line) and field."""
    return load_recipe(path, overrides, model=EvalRecipe)  # type: ignore[return-value]


# ---------------------------------------------------------------- server


@contextlib.contextmanager
def maybe_serve(recipe: EvalRecipe) -> Iterator[dict[str, BackendSpec]]:
    """Yield the role → BackendSpec map, with the `serve.roles` pointed at a vLLM server started here."""
    specs = dict(recipe.backends)
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


# ---------------------------------------------------------------- the run


def trajectories_path(out: str | Path, i: int = 0, n: int = 1) -> Path:
    """OUT/trajectories.jsonl, or collect's shard file name when the eval is sharded (n > 1)."""
    if n > 1:
        from omnidecision.collect.store import shard_path

        return shard_path(out, i, n)
    return Path(out) / TRAJECTORIES


def load_records(out: str | Path) -> list[RunRecord]:
    """Every complete record under OUT/trajectories*.jsonl, first one per (task_id, sample)."""
    seen: dict[tuple[str, int], RunRecord] = {}
    for f in sorted(Path(out).glob("trajectories*.jsonl")):
        for _, r in read_records(f):
            seen.setdefault((r.task_id, r.sample), r)
    return list(seen.values())


def run_eval(recipe: EvalRecipe, *, progress: bool = True, specs: dict[str, BackendSpec] | None = None
             ) -> dict[str, Any]:
    """The whole eval: tasks → (server) → runs → report files. Returns the report dict.

    `specs` (role → BackendSpec) replaces the recipe's backends and its `serve:` block (a caller that serves
    one model for several evals, like `ablate`, passes the served specs)."""
    from omnidecision.backends.factory import build_backend, build_backends
    from omnidecision.collect.runner import build_services, collect_runs, select_tasks
    from omnidecision.eval.report import write_report

    # -- tasks and services (collect's plumbing: same filters, same replay environment)
    tasks, all_tasks = select_tasks(recipe)
    if not tasks:
        raise RecipeError(f"{recipe.tasks.path}: no tasks left after the filters")
    services = build_services(recipe, all_tasks)
    i, n = recipe.shard_index
    out = Path(recipe.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "recipe.yaml").write_text(yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False), "utf-8")
    # -- runs (the server, if any, lives only for this phase)
    t0 = time.perf_counter()
    serving = contextlib.nullcontext(specs) if specs is not None else maybe_serve(recipe)
    with serving as role_specs:
        planner = planner_info(role_specs)
        judge_llm = build_backend(recipe.judge.llm) if recipe.judge.enabled and recipe.judge.llm else None
        summary = asyncio.run(collect_runs(
            tasks, recipe.agent, build_backends(role_specs), trajectories_path(out, i, n), samples=recipe.samples,
            concurrency=recipe.concurrency, judge=recipe.judge.enabled, judge_llm=judge_llm, services=services,
            progress=progress and recipe.progress, desc=f"eval {recipe.name or out.name}",
            judge_scorer=recipe.judge.scorer, retry_errors=recipe.retry_errors, breaker=recipe.breaker))
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
            "judge": {"enabled": recipe.judge.enabled, "scorer": recipe.judge.scorer,
                      "llm": recipe.judge.llm.model if recipe.judge.enabled and recipe.judge.llm else None},
            "budgets": {"step_budget": recipe.agent.step_budget, "max_tool_calls": recipe.agent.max_tool_calls}}
    rep = write_report(out, records, meta, plots=recipe.plots)
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
