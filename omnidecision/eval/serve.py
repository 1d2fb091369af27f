"""The server of an eval recipe's `serve:` block: the `VLLMServer` the run starts and the dry run shows
(`vllm_server`), the run's role → endpoint map with the served roles pointed at it (`maybe_serve`), what the
report says about the planner (`planner_info`), and the server's checks and command (`served`, the server's
`VLLMServer.plan`: the eval's checklist holds them; `serve_report` adds them to `omnidecision serve --dry-run`'s
report).

    omnidecision eval --config configs/eval/qwen3-8b-sft.yaml --serve.model runs/export/qwen3-8b-grpo
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from omnidecision.preflight import DryRunReport
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.parity import system_prompt_mismatch
from omnidecision.rollout.recipe import EvalRecipe, ServeSpec
from omnidecision.serving.vllm_server import ServerPlan, VLLMServer

logger = logging.getLogger(__name__)


def vllm_server(serve: ServeSpec, port: int | None = None) -> VLLMServer:
    """The server of a recipe's `serve:` block (not started): what the run starts and the dry run shows; `port`
    replaces the block's."""
    extra = list(serve.extra_args)
    if serve.tensor_parallel_size:
        extra += ["--tensor-parallel-size", str(serve.tensor_parallel_size)]
    return VLLMServer(serve.model, port=port or serve.port, lora_modules=serve.loras, extra_args=extra,
                      served_name=serve.served_name, max_model_len=serve.max_model_len,
                      max_lora_rank=serve.max_lora_rank, startup_timeout_s=serve.startup_timeout_s,
                      fresh_cache=serve.fresh_cache)


def served(serve: ServeSpec) -> ServerPlan:
    """The server of a recipe's `serve:` block, built (`vllm_server`) and checked (`VLLMServer.plan`) once."""
    server = vllm_server(serve)
    return server.plan()


@contextlib.contextmanager
def maybe_serve(recipe: EvalRecipe, server: VLLMServer | None = None) -> Iterator[dict[str, BackendSpec]]:
    """Yield the role → BackendSpec map, with the `serve.roles` pointed at a vLLM server started here: `server`
    (the prepared eval's, the one its dry run showed) or, without one, the `serve:` block's."""
    if server is None and recipe.serve is not None:
        server = vllm_server(recipe.serve)  # not started yet
    specs = dict(recipe.backends)
    local = specs.get("planner")
    if local is not None and local.kind == "local" and (
            why := system_prompt_mismatch(local.model, recipe.agent.planner_system_prompt)):
        logger.warning("train/serve parity: %s", why)
    if recipe.serve is None or server is None:
        yield specs
        return
    s = recipe.serve
    if "planner" in s.roles and (why := system_prompt_mismatch(s.model, recipe.agent.planner_system_prompt)):
        logger.warning("train/serve parity: %s", why)
    with server:
        for role in s.roles:
            spec = specs.get(role) or BackendSpec()
            specs[role] = spec.model_copy(update={"kind": "openai", "base_url": server.base_url,
                                                  "model": s.requested_model, "endpoint_kind": "vllm"})
        logger.info("serving %s at %s for roles %s", s.requested_model, server.base_url, s.roles)
        yield specs


def planner_info(specs: dict[str, BackendSpec]) -> dict[str, Any]:
    spec = specs.get("planner") or specs.get("default")
    if spec is None:
        return {"endpoint": None, "model": None}
    if spec.kind != "openai":
        return {"endpoint": None, "model": spec.model or spec.kind, "kind": spec.kind}
    return {"endpoint": spec.base_url, "model": spec.model, "kind": spec.kind}


def serve_report(report: DryRunReport, server: VLLMServer) -> None:
    """Add the checks of a `VLLMServer` (not started) and the command it would run to `report` (`VLLMServer.plan`:
    `omnidecision serve --dry-run`; an eval's checklist holds its server's plan itself)."""
    plan = server.plan()
    report.checks += plan.checks
    report.would_run.append(plan.would_run)
    report.extra.update(plan.extra)
