"""The server of an eval recipe's `serve:` block: the `VLLMServer` the run starts and the dry run shows
(`vllm_server`), the run's role → endpoint map with the served roles pointed at it (`maybe_serve`), what the
report says about the planner (`planner_info`), and the server's dry-run checks (`serve_report`: `omnidecision serve
--dry-run` and the eval's).

    omnidecision eval --config configs/eval/qwen3-8b-sft.yaml --serve.model runs/export/qwen3-8b-grpo
"""

from __future__ import annotations

import contextlib
import logging
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omnidecision.preflight import Check, DryRunReport, check_adapter, check_model
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.parity import system_prompt_mismatch
from omnidecision.rollout.recipe import EvalRecipe, ServeSpec
from omnidecision.serving.vllm_server import API_SERVER_MODULE as API_SERVER
from omnidecision.serving.vllm_server import VLLMServer, vllm_arg_error

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




@contextlib.contextmanager
def maybe_serve(recipe: EvalRecipe) -> Iterator[dict[str, BackendSpec]]:
    """Yield the role → BackendSpec map, with the `serve.roles` pointed at a vLLM server started here."""
    server = vllm_server(recipe.serve) if recipe.serve is not None else None  # not started yet
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


def serve_report(report: DryRunReport, server: VLLMServer) -> None:
    """Add the checks of a `VLLMServer` (not started) and the command it would run to `report`: the model, the
    adapters, their ranks, names and base, and the arguments (checked by the installed vLLM's parser)."""
    # what the server would run, asked of the server first; the model and adapter folders checked last
    cmd = server.command()
    shown = server.display_command()  # `--api-key X` shows as `--api-key ***`
    env = server.environment_overrides(Path("<private-temp-dir>"))
    try:
        error = vllm_arg_error(cmd[cmd.index(API_SERVER) + 1:])
        args = Check(what="vllm arguments", status="error" if error else "ok",
                     detail=error or "accepted by the installed vLLM's parser")
    except ImportError:
        args = Check(what="vllm arguments", status="deferred",
                     detail="vLLM is not installed here: its parser checks them on the server")
    loras: list[Check] = []
    if server.lora_modules:
        why = server.lora_rank_problem()
        ranks = ", ".join(f"{n} r={r}" for n, r in server.adapter_ranks().items()) if why is None else ""
        how = "given" if server.max_lora_rank is not None else "from adapter_config.json"
        loras.append(Check(what="lora rank", status="error" if why else "ok",
                           detail=why or f"--max-lora-rank {server.lora_rank()} ({how}; {ranks})"))
        if (clash := server.name_problem()) is not None:
            loras.append(Check(what="lora names", status="error", detail=clash))
        base = server.lora_base_problem()
        loras.append(Check(what="lora base", status="error" if base else "ok",
                           detail=base or f"every adapter's recorded base is the served model {server.model}"))
    adapters = [check_adapter(name, path) for name, path in server.lora_modules.items()]
    model_check = check_model(server.model, "model")
    if model_check.status == "ok" and (Path(server.model) / "adapter_config.json").exists():
        # vLLM loads a full model; an adapter rides on its base
        model_check.status, model_check.detail = "error", (
            f"{server.model} is a LoRA adapter: serve its base with --lora NAME={server.model} (or export --merge)")
    report.checks += [model_check, *adapters, *loras, args]
    report.would_run.append(" ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(shown)]))
    report.extra.update({"vllm_command": shown, "served_names": [server.served_name, *server.lora_modules],
                         "base_url": server.base_url})
