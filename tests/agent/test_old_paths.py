"""The agent's names that moved into `agent.ledger_loop` (and the baselines' messages into `agent.baselines`) still
import from their old modules this release, as the very objects of their new homes (CHANGELOG.md, "Changed").

    .venv/bin/pytest tests/agent/test_old_paths.py -q
"""

from __future__ import annotations

import importlib

import pytest

from omnidecision.agent.baselines import MAX_HISTORY_OBSERVATION_CHARS, history_text

# old module -> {name: new home}
OLD_PATHS = {
    "omnidecision.agent.runtime": {name: "omnidecision.agent.ledger_loop" for name in (
        "Run", "ToolRunner", "ROLE_FALLBACKS", "config_digest", "default_tool_runner")},
    "omnidecision.agent.roles": {
        **{name: "omnidecision.agent.ledger_loop" for name in (
            "MAX_OBSERVATION_CHARS", "decompose_messages", "observation_text", "critic_messages",
            "finalizer_messages")},
        **{name: "omnidecision.agent.baselines" for name in (
            "MAX_HISTORY_OBSERVATION_CHARS", "history_text", "react_messages", "history_finalizer_messages",
            "summarizer_messages")},
        **{name: "omnidecision.protocol.actions" for name in ("role_schema", "parse_role_output")}},
    "omnidecision.agent.loop": {name: "omnidecision.agent.ledger_loop" for name in (
        "continue_run", "task_context", "resolve_call", "why_rejected", "verdict_events", "gap_diagnosis")},
}
CASES = [(old, name, new) for old, names in OLD_PATHS.items() for name, new in names.items()]


@pytest.mark.parametrize(("old", "name", "new"), CASES, ids=[f"{o.rsplit('.', 1)[1]}.{n}" for o, n, _ in CASES])
def test_an_old_path_gives_the_new_object(old: str, name: str, new: str) -> None:
    assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name)


def test_the_baselines_render_their_history_with_the_loops_observation_view() -> None:
    """The baselines' history cuts each observation to their own limit through the ledger loop's view of it."""
    text = history_text([{"action": {"action": "call", "tool": "web_search"},
                          "observation": {"tool": "web_search", "ok": True, "text": "x" * 5000}}])
    observation = text.split("OBSERVATION: ", 1)[1]
    assert observation.startswith("tool=web_search ok=yes\n")
    assert len(observation.split("\n", 1)[1]) == MAX_HISTORY_OBSERVATION_CHARS
