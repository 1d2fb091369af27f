"""An agent run calls a tool registered from the user's own module (docs/guide/own-tasks.md, "Your own tools"): a
task that allows it, a planner that names it, the real tool runner, a record that replays; a task that does not
allow it has the call rejected like a built-in tool's.

    pytest -q tests/agent/test_own_tool_run.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap

import pytest

from omnidecision.agent.action_space import allowed_tools
from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.agent.replay import check_run
from omnidecision.ledger import actionable_need_indices, finish_available
from omnidecision.protocol.actions import tool_names
from omnidecision.protocol.chat import ChatRequest
from omnidecision.protocol.records import RunRecord
from omnidecision.protocol.registry import PLUGINS_ENV
from omnidecision.rollout.recipe import Environment
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import TOOLS

from .scripted import Scripted, critic_from, decompose, finalizer_pass

MODULE = textwrap.dedent('''
    from pydantic import BaseModel, ConfigDict

    from omnidecision.tools.base import Observation, ToolContext, register_tool

    KM = {"mi": 1.609344, "km": 1.0}


    class ConvertArgs(BaseModel):
        model_config = ConfigDict(extra="forbid")
        query: str


    @register_tool("unit_convert")
    class UnitConvert:
        name: str
        args_model = ConvertArgs

        async def run(self, args: ConvertArgs, ctx: ToolContext) -> Observation:
            amount, unit, _, target = args.query.split()
            return Observation(tool=self.name, text=f"{float(amount) * KM[unit] / KM[target]:.3f} {target}")
''')

QUESTION = "How many kilometres is a 3-mile run?"
NEEDS = decompose({"description": "3 miles in kilometres", "query_focus": "3 mi in km", "preferred_source": "code"})


@pytest.fixture
def unit_convert(tmp_path, monkeypatch):
    (tmp_path / "run_tools.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(PLUGINS_ENV, "run_tools")
    assert "unit_convert" in tool_names()  # loads the plugin
    yield "unit_convert"
    TOOLS.unregister("unit_convert")
    sys.modules.pop("run_tools", None)


def calls_the_own_tool(request: ChatRequest) -> str:
    ledger = request.context["ledger"]
    if finish_available(ledger):
        return '{"action": "finish"}'
    return json.dumps({"action": "call", "need": actionable_need_indices(ledger)[0], "tool": "unit_convert"})


def run(task: Task) -> RunRecord:
    backend = Scripted(decompose=NEEDS, planner=calls_the_own_tool, critic=critic_from({0: "4.828"}),
                       finalizer=finalizer_pass)
    record = asyncio.run(run_task(task, AgentConfig(max_attempts=2), {"default": backend}))
    assert check_run(RunRecord.model_validate_json(record.model_dump_json())) is None  # replays exactly
    return record


def test_a_run_calls_the_tool_of_ones_own_module(unit_convert):
    task = Task(id="run-km", question=QUESTION, answer="4.828", tools=[unit_convert, "code_executor"])
    r = run(task)
    assert (r.outcome, r.answer, r.error) == ("accepted", "4.828", None)
    assert r.steps[0].observation["tool"] == unit_convert and r.steps[0].observation["text"] == "4.828 km"
    assert r.totals.tool_calls == {unit_convert: 1} and r.final_ledger.needs[0].filled_by == unit_convert
    assert "TOOLS: unit_convert, code_executor" in r.steps[0].planner_messages[1]["content"]  # R0 names it


def test_a_task_that_does_not_allow_it_rejects_the_call(unit_convert):
    r = run(Task(id="run-km", question=QUESTION, answer="4.828", tools=["code_executor"]))
    assert r.totals.tool_calls == {} and r.totals.invalid_actions >= 1
    reasons = [e.error for s in r.steps for e in s.events if e.kind == "invalid_action"]
    assert reasons and reasons[0].startswith("tool unit_convert is not allowed for this task")


def test_without_the_plugin_the_planners_call_is_a_schema_error(monkeypatch):
    monkeypatch.delenv(PLUGINS_ENV, raising=False)
    # a task that lists the tool is refused where it is read; one that allows every tool runs, and the call is not
    with pytest.raises(ValueError, match=r"tools\.0\n.*unknown tool 'unit_convert'"):
        Task(id="run-km", question=QUESTION, answer="4.828", tools=["unit_convert"])
    r = run(Task(id="run-km", question=QUESTION, answer="4.828"))
    reasons = [e.error for s in r.steps for e in s.events if e.kind == "invalid_action"]
    assert r.totals.tool_calls == {} and reasons and reasons[0].startswith("schema error at call.tool")


def test_constrained_decoding_and_a_recipes_tool_list_admit_it(unit_convert):
    assert "unit_convert" in allowed_tools(None)
    assert allowed_tools(Task(id="t", question=QUESTION, answer="4.828", tools=["unit_convert"])) == ["unit_convert"]
    assert Environment(tools=["web_search", "unit_convert"]).tools == ["web_search", "unit_convert"]
    TOOLS.unregister("unit_convert")
    with pytest.raises(ValueError, match=r"unknown tool\(s\) \['unit_convert'\].*register_tool"):
        Environment(tools=["unit_convert"])
