"""Small scripted offline backends and tool runners for the agent tests (real loop, reducer and parsers)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from omnidecision.ledger import actionable_need_indices, finish_available
from omnidecision.protocol.chat import ChatRequest, ChatResponse, Usage
from omnidecision.tools.base import Observation, ToolContext


class Scripted:
    """A backend whose reply for each role is computed by a function of the request (or a fixed text)."""

    def __init__(self, **replies: str | Callable[[ChatRequest], str]) -> None:
        self.replies = replies
        self.requests: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        reply = self.replies[request.role]
        text = reply(request) if callable(reply) else reply
        n_prompt = sum(len(str(m["content"]).split()) for m in request.messages)
        return ChatResponse(text=text, usage=Usage(prompt_tokens=n_prompt, completion_tokens=len(text.split())),
                            model="scripted")


def decompose(*needs: dict[str, Any], slots: list[dict] | None = None) -> str:
    return json.dumps({"needs": list(needs), "slots": slots or []})


def greedy_planner(request: ChatRequest) -> str:
    """Finish when finish is available, else call the first actionable need (the short form)."""
    ledger = request.context["ledger"]
    if finish_available(ledger):
        return '{"action": "finish"}'
    return json.dumps({"action": "call", "need": actionable_need_indices(ledger)[0]})


def critic_from(values: dict[int, str | None]) -> Callable[[ChatRequest], str]:
    """Supports the called need with `values[need]`; a None value means the source says nothing (omits)."""

    def reply(request: ChatRequest) -> str:
        need = request.context["action"].need
        value = values.get(need)
        if value is None:
            return json.dumps({"verdicts": [{"need": need, "verdict": "omits"}]})
        return json.dumps({"verdicts": [{"need": need, "verdict": "supports", "value": value, "status": "filled"}],
                           "evidence": [{"claim": f"need {need} is {value}", "supports": [need]}]})

    return reply


def finalizer_pass(request: ChatRequest) -> str:
    ledger = request.context.get("ledger")
    value = ledger.needs[-1].value if ledger is not None and ledger.needs else "42"
    return json.dumps({"answer": value or "unknown", "check": "pass"})


async def echo_tool(name: str, arguments: dict, ctx: ToolContext) -> Observation:
    return Observation(tool=name, text=f"{name} found: {json.dumps(arguments, sort_keys=True)}")
