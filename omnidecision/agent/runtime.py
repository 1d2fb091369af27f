"""Per-run plumbing shared by the ledger loop and the react/memory baselines.

Backend lookup by role, LLM calls with usage/latency/cost accounting (`Run.chat`), tool execution that never
raises (`Run.run_tool`), and the run's totals (`Run.totals`). What only the ledger loop does with a run sits in
`omnidecision.agent.loop`, beside the loop that uses it: asking a role and parsing its reply (`ask`), the commit
point that hands each event to the reducer (`commit`, `invalid_event`), and the run's end with its final ledger
(`close`).

Not meant to be run directly; see `omnidecision.agent.loop.run_task`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from omnidecision.agent.config import AgentConfig
from omnidecision.ledger import Ledger
from omnidecision.protocol.actions import role_schema
from omnidecision.protocol.chat import BackendError, ChatBackend, ChatRequest, ChatResponse, Usage
from omnidecision.protocol.records import RoleCall, Totals
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import Observation, ToolContext
from omnidecision.tools.registry import build_tool_context, run_tool

logger = logging.getLogger(__name__)

ToolRunner = Callable[[str, dict, ToolContext], Awaitable[Observation]]

# Where a role falls back to when `backends` has no entry for it.
ROLE_FALLBACKS: dict[str, tuple[str, ...]] = {
    "planner": ("default",),
    "decompose": ("default", "planner"),
    "critic": ("default", "planner"),
    "finalizer": ("default", "planner"),
    "summarizer": ("default", "planner"),
}


def config_digest(config: AgentConfig) -> str:
    return hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:12]


def default_tool_runner() -> ToolRunner:
    """The tools registry's `run_tool`."""
    return run_tool


class Run:
    """Mutable bookkeeping of one run: the ledger state (the ledger loop's; the baselines leave it empty), usage,
    cost, tool calls, invalid actions, timing."""

    def __init__(self, task: Task, config: AgentConfig, backends: dict[str, ChatBackend],
                 tool_runner: ToolRunner | None, services: dict | None, *, sample: int = 0,
                 run_id: str = "") -> None:
        self.task, self.config, self.backends = task, config, backends
        self.sample, self.run_id = sample, run_id
        self.tool_runner = tool_runner or default_tool_runner()
        # the registry's own per-tool timeout follows the agent's (a perception call may need minutes)
        self.ctx = build_tool_context(task, services, config.tool_settings())
        self.state = Ledger()
        self.usage = Usage()
        self.planner_prompt_tokens = 0
        self.cost: float | None = None
        self.invalid = 0
        self.tool_calls: dict[str, int] = {}
        self.planner_model = ""
        self.t0 = time.perf_counter()

    # -- models ---------------------------------------------------------------------------------------------
    def backend(self, role: str) -> ChatBackend:
        for name in (role, *ROLE_FALLBACKS.get(role, ("default",))):
            if name in self.backends:
                return self.backends[name]
        raise BackendError(f"no backend configured for role {role!r} (have: {sorted(self.backends)})")

    async def chat(self, role: str, messages: list[dict[str, Any]], context: dict[str, Any],
                   schema_role: str | None = None, schema: dict[str, Any] | None = None) -> ChatResponse:
        """One LLM call; raises BackendError (the run stops with outcome `error`). `schema` replaces the role's
        JSON schema (the planner's per-state action space)."""
        schema = schema if schema is not None else role_schema(schema_role or role)
        # Offline backends draw their noise per (run, sample): without these keys every sample would be identical.
        context = {"sample": self.sample, "run_id": self.run_id, **context}
        request = ChatRequest(role=role if role != "react" else "planner", messages=messages, json_schema=schema,
                              schema_name=f"{schema_role or role}_output", context=context)
        t = time.perf_counter()
        try:
            resp = await self.backend(role).chat(request)
        except BackendError:
            raise
        except Exception as exc:  # a backend bug must not crash the batch: it is a dead backend for this run
            raise BackendError(f"{role} backend failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(resp, ChatResponse):
            raise BackendError(f"{role} backend returned {type(resp).__name__}, not a ChatResponse")
        if not resp.latency_s:
            resp.latency_s = time.perf_counter() - t
        self.account(role, resp)
        return resp

    def account(self, role: str, resp: ChatResponse) -> None:
        """Add a reply's usage and cost to the run's totals (`chat` does it for every call; `agent.loop.ask` for a
        reply it was given)."""
        self.usage = self.usage + resp.usage
        if resp.cost is not None:
            self.cost = (self.cost or 0.0) + resp.cost
        if role in ("planner", "react"):
            self.planner_prompt_tokens += resp.usage.prompt_tokens
            self.planner_model = self.planner_model or resp.model

    @staticmethod
    def role_call(role: str, resp: ChatResponse | None, error: str | None = None) -> RoleCall:
        if resp is None:
            return RoleCall(role=role, error=error)
        return RoleCall(role=role, raw=resp.text, usage=resp.usage, latency_s=resp.latency_s, error=error,
                        model=resp.model, cost=resp.cost)

    # -- tools ----------------------------------------------------------------------------------------------
    async def run_tool(self, tool: str, arguments: dict) -> Observation:
        """Run one tool; errors, timeouts and bad return values become a failed observation."""
        self.tool_calls[tool] = self.tool_calls.get(tool, 0) + 1
        try:
            obs = await asyncio.wait_for(self.tool_runner(tool, arguments, self.ctx), self.config.tool_timeout_s)
        except asyncio.TimeoutError:
            return Observation(tool=tool, ok=False, error=f"timeout after {self.config.tool_timeout_s:g}s",
                               limit_hit="timeout")
        except Exception as exc:
            logger.warning("tool %s raised %s: %s", tool, type(exc).__name__, exc)
            return Observation(tool=tool, ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
        if not isinstance(obs, Observation):
            return Observation(tool=tool, ok=False, error=f"tool returned {type(obs).__name__}, not an Observation")
        return obs

    def totals(self) -> Totals:
        calls = dict(self.state.tool_call_counts) if self.state.initialized else dict(self.tool_calls)
        return Totals(tool_calls=calls, prompt_tokens=self.usage.prompt_tokens,
                      completion_tokens=self.usage.completion_tokens,
                      planner_prompt_tokens=self.planner_prompt_tokens, cost=self.cost,
                      wall_s=round(time.perf_counter() - self.t0, 4), invalid_actions=self.invalid)
