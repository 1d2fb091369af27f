"""The replay backend (`kind: replay`): a minimal rule-based backend for every role, enough to run any task end to
end offline (e.g. OmniGAIA records in the replay environment of `tasks.replay_env`).

It decomposes one need per asset (its modality) plus one web need, calls each actionable need once, fills a need
with what an ok observation says, then finishes with the last filled value. Not a solver: it exercises the loop,
the tools and the environment's services.

    backends: {default: {kind: replay}}          # in a recipe (options: max_value_chars)
"""

from __future__ import annotations

import json
import re
from typing import Any

from omnidecision.backends.factory import register_backend
from omnidecision.ledger.readiness import actionable_need_indices
from omnidecision.protocol.chat import BackendSpec, ChatRequest, ChatResponse
from omnidecision.tasks.schema import Task

_ASSET_SOURCE = {"video": "clip", "audio": "audio", "image": "frame"}


class ReplayBackend:
    """Offline backend for every role on any task: one need per asset (its modality) and one web need; the planner
    calls each actionable need once, then finishes; the critic fills a need with what an ok observation says; the
    finalizer answers with the last filled value. Not a solver: it exercises the loop, tools and services."""

    def __init__(self, max_value_chars: int = 160) -> None:
        self.max_value_chars = max_value_chars

    async def chat(self, request: ChatRequest) -> ChatResponse:
        handler = getattr(self, f"_{request.role}", None)
        text = handler(request.context) if handler else json.dumps({"answer": "", "check": "fail"})
        return ChatResponse(text=text, model="replay-rules")

    def _decompose(self, ctx: dict[str, Any]) -> str:
        task: Task = ctx["task"]
        first_sentence = re.split(r"(?<=[.?!])\s", task.question.strip())[0][:200]
        needs = [
            {"description": f"what {a.type} {a.id} shows or says", "role": "blocking",
             "query_focus": first_sentence, "preferred_source": _ASSET_SOURCE[a.type]}
            for a in task.assets
        ]
        needs.append({"description": "facts from the web", "role": "blocking", "query_focus": first_sentence,
                      "preferred_source": "web"})
        return json.dumps({"needs": needs})

    @staticmethod
    def _call(task: Task, need: int) -> str:
        action: dict[str, Any] = {"action": "call", "need": need}
        if need < len(task.assets):  # needs 0..n-1 are the assets, in order (see _decompose)
            action["arguments"] = {"asset_id": task.assets[need].id}
        return json.dumps(action)

    def _planner(self, ctx: dict[str, Any]) -> str:
        task: Task = ctx["task"]
        ledger = ctx.get("ledger")
        if ledger is not None:
            fresh = [i for i in actionable_need_indices(ledger) if ledger.needs[i].attempts == 0]
            return self._call(task, fresh[0]) if fresh else json.dumps({"action": "finish"})
        history = ctx.get("history") or []
        if len(history) < len(task.assets) + 1:
            return self._call(task, len(history))
        return json.dumps({"action": "finish"})

    def _critic(self, ctx: dict[str, Any]) -> str:
        action, obs = ctx.get("action"), ctx.get("observation")
        need = getattr(action, "need", 0)
        if obs is not None and obs.ok and obs.text.strip():
            value = " ".join(obs.text.split())[: self.max_value_chars]
            return json.dumps({"verdicts": [{"need": need, "verdict": "supports", "status": "filled", "value": value}],
                               "evidence": [{"claim": value, "supports": [need]}]})
        return json.dumps({"verdicts": [{"need": need, "verdict": "omits", "status": "unfillable"}]})

    def _finalizer(self, ctx: dict[str, Any]) -> str:
        ledger = ctx.get("ledger")
        values = [n.value for n in ledger.needs if n.status == "filled" and n.value] if ledger is not None else []
        return json.dumps({"answer": values[-1] if values else "unknown", "check": "pass"})

    def _summarizer(self, ctx: dict[str, Any]) -> str:
        return "replay run: observations so far are in the history."


@register_backend("replay")
def build_replay_backend(spec: BackendSpec) -> ReplayBackend:
    return ReplayBackend(**spec.options)
