"""Registry error paths: unknown tool, bad arguments naming the field, a tool past its timeout, a crashing tool;
`arguments_for`; the `omnidecision tool` command."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pydantic import BaseModel
from typer.testing import CliRunner

from omnidecision.tasks.schema import Task
from omnidecision.tools import registry
from omnidecision.tools.registry import TOOLS, arguments_for, build_tool_context, run_tool

TASK = Task(id="t", question="?")


def test_registry_names():
    assert set(TOOLS) == {
        "subtitle_grounding",
        "audio_scouting",
        "clip_grounding",
        "frame_confirmation",
        "web_search",
        "page_reader",
        "code_executor",
    }


def test_unknown_tool_and_bad_arguments_name_the_field():
    ctx = build_tool_context(TASK)
    obs = asyncio.run(run_tool("teleport", {}, ctx))
    assert not obs.ok and "unknown tool 'teleport'" in obs.error
    obs = asyncio.run(run_tool("web_search", {"query": "x", "k": "many"}, ctx))
    assert not obs.ok and "k:" in obs.error
    obs = asyncio.run(run_tool("web_search", {"query": "x", "colour": "red"}, ctx))
    assert not obs.ok and "colour" in obs.error
    obs = asyncio.run(run_tool("code_executor", {}, ctx))
    assert not obs.ok and "code:" in obs.error
    obs = asyncio.run(run_tool("web_search", ["not", "a", "dict"], ctx))  # type: ignore[arg-type]
    assert not obs.ok and "arguments" in obs.error


class _Args(BaseModel):
    pass


class _Hang:
    name, args_model = "hang", _Args

    async def run(self, args, ctx):
        await asyncio.sleep(3600)


class _Crash:
    name, args_model = "crash", _Args

    async def run(self, args, ctx):
        raise RuntimeError("backend exploded")


def test_timeout_and_crash_become_observations(monkeypatch):
    monkeypatch.setitem(registry.TOOLS, "hang", _Hang())
    monkeypatch.setitem(registry.TOOLS, "crash", _Crash())
    ctx = build_tool_context(TASK, settings={"tool_timeout_s": 0.2})
    obs = asyncio.run(run_tool("hang", {}, ctx))
    assert not obs.ok and obs.limit_hit == "timeout" and "0.2s" in obs.error
    obs = asyncio.run(run_tool("crash", {}, ctx))
    assert not obs.ok and "RuntimeError: backend exploded" in obs.error


def test_search_without_corpus_is_empty_not_an_error():
    obs = asyncio.run(run_tool("web_search", {"query": "anything"}, build_tool_context(TASK)))
    assert obs.ok and obs.fields["hits"] == []


def test_arguments_for_maps_query_to_primary_field():
    assert arguments_for("web_search", "bridge year", None) == {"query": "bridge year"}
    assert arguments_for("code_executor", "print(1)", {}) == {"code": "print(1)"}
    assert arguments_for("page_reader", "https://a.org", {"max_chars": 500}) == {
        "url": "https://a.org",
        "max_chars": 500,
    }
    assert arguments_for("subtitle_grounding", "q", {"query": "explicit"}) == {"query": "explicit"}
    assert arguments_for("audio_scouting", None, {"start": 3}) == {"start": 3}


def test_cli_tool_command(tmp_path: Path, media_task):
    import typer

    from omnidecision.tools.cli import tool

    app = typer.Typer()
    app.command()(tool)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n" + media_task.model_dump_json() + "\n", encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(
        app, ["subtitle_grounding", "--args", '{"query": "guide"}', "--tasks", str(tasks), "--task-id", "t1"]
    )
    assert res.exit_code == 0, res.output
    assert "Maria Lopez" in json.loads(res.stdout)["text"]
    res = runner.invoke(app, ["web_search", "--args", "{not json"])
    assert res.exit_code != 0 and "--args" in res.output
    # arguments the tool's schema refuses: a usage error before any tool runs, as in its dry run (exit 2)
    res = runner.invoke(app, ["web_search", "--args", "{}"])
    said = " ".join(res.output.replace("│", " ").split())  # click boxes and wraps its usage error
    assert res.exit_code == 2 and "invalid arguments for web_search: query: Field required" in said


def test_perception_tools_default_to_an_asset_of_their_own_type():
    from omnidecision.tasks.schema import Asset, AudioEvent, FrameCaption, Task

    task = Task(id="multi", question="q", assets=[
        Asset(id="img", type="image", frame_captions=[FrameCaption(t=0, caption="a red lighthouse")]),
        Asset(id="aud", type="audio", audio_events=[AudioEvent(start=3, end=4, label="ship horn blast")]),
    ])
    ctx = build_tool_context(task)
    audio = asyncio.run(run_tool("audio_scouting", {"query": "ship horn"}, ctx))
    assert audio.ok and audio.source.asset_id == "aud"
    frame = asyncio.run(run_tool("frame_confirmation", {"query": "red lighthouse"}, ctx))
    assert frame.source.asset_id == "img"
