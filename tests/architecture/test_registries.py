"""The registries (docs/architecture.md, "How to add": a name is registered once, next to its code): adding a toy
tool, a toy task format or a toy backend kind is one class or function plus its registration; the lists lower layers
keep agree with what is registered; an unknown name lists the registered ones.

    pytest -q tests/architecture/test_registries.py
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from omnidecision.backends.factory import BACKEND_KINDS, build_backend
from omnidecision.ledger.schema import PERCEPTION_TOOLS, SOURCE_TOOL, TOOL_NAMES, WEB_TOOLS
from omnidecision.protocol.actions import PRIMARY_FIELD
from omnidecision.protocol.chat import BackendSpec
from omnidecision.protocol.observations import Observation
from omnidecision.protocol.records import JudgeResult
from omnidecision.protocol.registry import UnknownName
from omnidecision.tasks.formats import TASK_FORMATS, TaskFormat, register_format
from omnidecision.tasks.grading import judge_offline
from omnidecision.tasks.loaders import detect_format, load_tasks
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import TOOLS, ToolContext, register_tool
from omnidecision.tools.registry import build_tool_context, run_tool

# ---------------------------------------------------------------- a toy tool: one class + @register_tool


class EchoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str


@pytest.fixture
def toy_tool():
    @register_tool("echo")
    class Echo:
        name: str
        args_model = EchoArgs

        async def run(self, args: EchoArgs, ctx: ToolContext) -> Observation:
            return Observation(tool=self.name, text=args.query[::-1])

    yield Echo
    TOOLS.unregister("echo")


def test_a_toy_tool_is_one_class_plus_its_registration(toy_tool):
    assert "echo" in TOOLS and toy_tool.name == "echo"
    obs = asyncio.run(run_tool("echo", {"query": "abc"}, build_tool_context(Task(id="t", question="?"))))
    assert obs.ok and obs.text == "cba"
    bad = asyncio.run(run_tool("echo", {"q": "abc"}, build_tool_context(Task(id="t", question="?"))))
    assert not bad.ok and "query" in bad.error


def test_unknown_tool_lists_the_registered_ones():
    obs = asyncio.run(run_tool("teleport", {}, build_tool_context(Task(id="t", question="?"))))
    assert not obs.ok and "unknown tool 'teleport'" in obs.error
    assert all(name in obs.error for name in TOOL_NAMES)


def test_registered_tools_agree_with_the_lists_of_lower_layers():
    # ledger.schema.ToolName is the one list below the tools package (the action schema validates against it)
    assert sorted(TOOLS) == sorted(TOOL_NAMES)
    assert set(SOURCE_TOOL.values()) <= set(TOOL_NAMES)
    assert set(PERCEPTION_TOOLS) | set(WEB_TOOLS) <= set(TOOL_NAMES)
    for name in TOOL_NAMES:
        fields = TOOLS[name].args_model.model_fields
        assert PRIMARY_FIELD[name] in fields, f"{name}: the planner's query goes to {PRIMARY_FIELD[name]!r}"
        assert ("asset_id" in fields) == (name in PERCEPTION_TOOLS), f"{name}: perception tools take asset_id"


# ---------------------------------------------------------------- a toy task format: one class + @register_format


@pytest.fixture
def toy_format():
    @register_format("toycsv")
    class ToyCsv(TaskFormat):
        """question,answer per line; scored case-sensitively (its own protocol)."""

        options = frozenset({"prefix"})

        def detect(self, path: Path, first: dict[str, Any] | None) -> bool:
            return path.is_file() and path.suffix == ".toycsv"

        def load(self, path: Path, **options: Any) -> list[Task]:
            rows = [line.split(",") for line in path.read_text("utf-8").splitlines() if line.strip()]
            return [Task(id=f"{options.get('prefix', 'q')}{i}", question=q, answer=a, source="toycsv")
                    for i, (q, a) in enumerate(rows)]

        def score(self, task: Task, prediction: str | None, scorer: str) -> JudgeResult:
            return JudgeResult(correct=prediction == task.answer, method="toycsv_exact", prediction=prediction)

    yield ToyCsv
    TASK_FORMATS.unregister("toycsv")


def test_a_toy_task_format_is_one_class_plus_its_registration(toy_format, tmp_path):
    path = tmp_path / "tasks.toycsv"
    path.write_text("Capital of France?,Paris\n2+2?,4\n", "utf-8")
    assert detect_format(path) == "toycsv"
    tasks = load_tasks(path, prefix="toy")
    assert [t.id for t in tasks] == ["toy0", "toy1"]
    # the format owns scoring: exact and case-sensitive, where the generic lenient scorer would accept "paris"
    assert judge_offline(tasks[0], "Paris").correct is True
    assert judge_offline(tasks[0], "paris").method == "toycsv_exact" and not judge_offline(tasks[0], "paris").correct
    with pytest.raises(ValueError, match="do not apply"):
        load_tasks(path, fmt="toycsv", media_dir="x")


def test_unknown_task_format_lists_the_registered_ones(tmp_path):
    with pytest.raises(ValueError, match="unknown task format 'csv'.*jsonl.*omnigaia.*worldsense"):
        load_tasks(tmp_path, fmt="csv")
    with pytest.raises(UnknownName, match="registered: jsonl, omnigaia, synthetic, worldsense"):
        TASK_FORMATS["csv"]


def test_shipped_formats_keep_their_own_scoring():
    gaia = Task(id="g", question="?", answer="790", source="omnigaia")
    assert judge_offline(gaia, "so <answer>790</answer>").method == "exact_match"
    ws = Task(id="w", question="?", answer="B", options=["A. x", "B. y"], source="worldsense")
    assert judge_offline(ws, "The answer is (B).").method == "mcq"
    plain = Task(id="p", question="?", answer="790", source="jsonl")
    assert judge_offline(plain, "790 units").method == "lenient_match"


# ---------------------------------------------------------------- backend kinds


def test_backend_kinds_are_registered_and_an_unknown_one_lists_them():
    assert {"openai", "teacher", "first-actionable", "replay"} <= set(BACKEND_KINDS)
    assert type(build_backend(BackendSpec(kind="replay"))).__name__ == "ReplayBackend"
    with pytest.raises(ValueError, match="unknown backend kind 'nope'; registered: .*replay"):
        build_backend(BackendSpec(kind="nope"))


def test_a_toy_backend_kind_is_one_function_plus_its_registration():
    from omnidecision.protocol.chat import ChatRequest, ChatResponse

    class Parrot:
        async def chat(self, request: ChatRequest) -> ChatResponse:
            return ChatResponse(text=json.dumps({"action": "finish"}), model="parrot")

    BACKEND_KINDS.register("parrot")(lambda spec: Parrot())
    try:
        reply = asyncio.run(build_backend(BackendSpec(kind="parrot")).chat(ChatRequest(role="planner", messages=[])))
        assert reply.model == "parrot"
    finally:
        BACKEND_KINDS.unregister("parrot")


def test_a_recipe_naming_an_unknown_format_or_kind_fails_at_load_listing_the_registered_ones():
    from omnidecision.rollout.recipe import RecipeError, recipe_from_dict

    with pytest.raises(RecipeError, match=r"tasks.format: .*unknown task format 'csv'; registered: .*jsonl"):
        recipe_from_dict({"tasks": {"path": "x", "format": "csv"}, "backends": {"default": {"kind": "teacher"}}})
    with pytest.raises(RecipeError, match=r"backends: .*unknown backend kind 'nope'; registered: .*openai"):
        recipe_from_dict({"tasks": {"path": "x"}, "backends": {"default": {"kind": "nope"}}})


def test_a_toy_reward_check_is_one_function_plus_its_registration():
    """A check registered in a test is a GRPO reward by name and a component of the closure rubric, with its weight;
    nothing else is edited."""
    from omnidecision.rewards import get_reward_funcs
    from omnidecision.rewards.checks import CHECKS, DEFAULT_WEIGHTS, register_check, unregister_check
    from omnidecision.rewards.closure import EXAMPLE_LEDGER, ClosureRubric

    @register_check("toy_prefers_finish", weight=2.0)
    def toy(decision, state) -> float:
        return 1.0 if decision.is_finish else 0.0

    try:
        assert CHECKS["toy_prefers_finish"] is toy and DEFAULT_WEIGHTS["toy_prefers_finish"] == 2.0
        (reward,) = get_reward_funcs(["toy_prefers_finish"])
        assert reward(['{"action": "finish"}', '{"action": "call", "need": 0}'], ledger=[EXAMPLE_LEDGER] * 2) == [
            1.0, 0.0]
        rubric = ClosureRubric({"format": 1.0, "toy_prefers_finish": 1.0})
        assert rubric(['{"action": "finish"}'], ledger=[EXAMPLE_LEDGER]) == [1.0]
        with pytest.raises(ValueError, match="already registered"):
            register_check("toy_prefers_finish")(lambda d, s: 0.0)
    finally:
        unregister_check("toy_prefers_finish")
    with pytest.raises(ValueError, match="unknown reward 'toy_prefers_finish'"):
        get_reward_funcs(["toy_prefers_finish"])
