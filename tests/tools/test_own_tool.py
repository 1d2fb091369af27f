"""A tool of one's own, registered from a module outside the package (docs/guide/own-tasks.md, "Your own tools"):
named in `OMNIDECISION_PLUGINS` or by an entry point of the group `omnidecision.plugins`, it runs by name from
`omnidecision tool`, a planner's call may name it (and only a registered name), the planner's JSON schema lists it;
a plugin that does not import is named with its import error.

    pytest -q tests/tools/test_own_tool.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from omnidecision.protocol.actions import (
    PLANNER_ADAPTER,
    TOOL_NAMES,
    CallAction,
    check_tool_name,
    parse_planner_output,
    planner_json_schema,
    tool_names,
)
from omnidecision.protocol.registry import PLUGINS_ENV, PluginError, load_plugins
from omnidecision.tools.base import TOOLS, register_tool

OMNIDECISION = Path(sys.executable).parent / "omnidecision"

# The user's module: one class and its registration, importing only the public decorator and records.
MODULE = textwrap.dedent('''
    from pydantic import BaseModel, ConfigDict

    from omnidecision.tools.base import Observation, ToolContext, ToolError, register_tool


    class ReverseArgs(BaseModel):
        model_config = ConfigDict(extra="forbid")
        query: str


    @register_tool("{name}")
    class Reverse:
        name: str
        args_model = ReverseArgs

        async def run(self, args: ReverseArgs, ctx: ToolContext) -> Observation:
            if not args.query:
                raise ToolError("nothing to reverse")
            return Observation(tool=self.name, text=args.query[::-1], fields={{"task": ctx.task.id}})
''')


def write_plugin(folder: Path, module: str, tool: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(MODULE.format(name=tool), encoding="utf-8")
    return folder


def omnidecision(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(OMNIDECISION), *args], env={**os.environ, **env}, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def own_tool(tmp_path, monkeypatch):
    """`reverse_text`, registered in this process from tmp_path/plugins/my_reverse.py through the variable."""
    monkeypatch.syspath_prepend(str(write_plugin(tmp_path / "plugins", "my_reverse", "reverse_text")))
    monkeypatch.setenv(PLUGINS_ENV, "my_reverse")
    tool_names()  # loads the plugins
    yield "reverse_text"
    TOOLS.unregister("reverse_text")
    sys.modules.pop("my_reverse", None)


def test_the_tool_runs_by_name_from_the_command_line(tmp_path):
    plugins = write_plugin(tmp_path / "plugins", "my_reverse", "reverse_text")
    env = {"PYTHONPATH": str(plugins), PLUGINS_ENV: "my_reverse"}
    res = omnidecision("tool", "reverse_text", "--args", '{"query": "abc"}', env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    obs = json.loads(res.stdout)
    assert (obs["tool"], obs["ok"], obs["text"], obs["fields"]) == ("reverse_text", True, "cba", {"task": "adhoc"})
    # its clean failure is an observation like a built-in tool's (exit 1)
    res = omnidecision("tool", "reverse_text", "--args", '{"query": ""}', env=env, cwd=tmp_path)
    assert res.returncode == 1 and json.loads(res.stdout)["error"] == "nothing to reverse"


def test_without_the_plugin_the_name_is_unknown_and_the_error_says_how_to_register(tmp_path):
    res = omnidecision("tool", "reverse_text", "--args", "{}", env={PLUGINS_ENV: ""}, cwd=tmp_path)
    assert res.returncode == 2
    err = " ".join(res.stderr.replace("│", " ").split())
    assert "unknown tool 'reverse_text'" in err and "web_search" in err
    assert PLUGINS_ENV in err and "omnidecision.plugins" in err


def test_a_plugin_module_that_does_not_import_is_named_with_its_error(tmp_path):
    broken = tmp_path / "plugins"
    broken.mkdir()
    (broken / "needs_missing.py").write_text("import no_such_dependency_xyz\n", encoding="utf-8")
    env = {"PYTHONPATH": str(broken), PLUGINS_ENV: "no_such_plugin_xyz, needs_missing"}
    res = omnidecision("tool", "web_search", "--args", '{"query": "x"}', env=env, cwd=tmp_path)
    assert res.returncode == 1 and not res.stdout
    # the variable, each module, each import error (the plugin's own missing dependency is told from the plugin)
    assert f"{PLUGINS_ENV} names 'no_such_plugin_xyz', which failed: ModuleNotFoundError: No module named " \
           "'no_such_plugin_xyz'" in res.stderr
    assert f"{PLUGINS_ENV} names 'needs_missing', which failed: ModuleNotFoundError: No module named " \
           "'no_such_dependency_xyz'" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_failed_plugin_raises_with_its_import_error_as_the_cause_and_is_tried_again(monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, "no_such_plugin_xyz")
    for _ in range(2):  # not remembered as loaded: every lookup fails loudly
        with pytest.raises(PluginError, match="no_such_plugin_xyz") as info:
            load_plugins()
        assert isinstance(info.value.__cause__, ModuleNotFoundError)
        assert isinstance(info.value, ImportError)


def test_an_entry_point_of_an_installed_package_registers_its_tool(tmp_path):
    # an installed distribution's metadata, as `pip install` writes it, with one entry point of the group
    site = write_plugin(tmp_path / "site", "my_reverse", "reverse_text")
    dist = site / "my_reverse-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-reverse\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[omnidecision.plugins]\nreverse = my_reverse\n", encoding="utf-8")
    res = omnidecision("tool", "reverse_text", "--args", '{"query": "abc"}', env={"PYTHONPATH": str(site)},
                       cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["text"] == "cba"


def test_a_planner_call_may_name_a_registered_tool_and_only_one(own_tool):
    assert tool_names() == (*TOOL_NAMES, own_tool) and own_tool in TOOLS
    action, err = parse_planner_output(json.dumps({"action": "call", "need": 0, "tool": own_tool, "query": "x"}))
    assert err is None and isinstance(action, CallAction) and action.tool == own_tool
    # an unregistered name fails as a closed list did, now listing the own tool too
    action, err = parse_planner_output('{"action": "call", "need": 0, "tool": "teleport"}')
    assert action is None and err.startswith("schema error at call.tool: Input should be 'subtitle_grounding'")
    assert err.endswith(f"'code_executor' or '{own_tool}'")
    # a grammar-constrained planner may emit it: the schema sent as response_format lists it
    enum = planner_json_schema()["$defs"]["CallAction"]["properties"]["tool"]["anyOf"][0]["enum"]
    assert enum == [*TOOL_NAMES, own_tool]
    assert check_tool_name(own_tool) == own_tool


def test_without_own_tools_the_checks_are_the_closed_lists_they_were(monkeypatch):
    monkeypatch.delenv(PLUGINS_ENV, raising=False)
    assert tool_names() == TOOL_NAMES
    # the static schema (the reference's) and the run-time one: the built-in names, as the Literal gave them
    for schema in (PLANNER_ADAPTER.json_schema(), planner_json_schema()):
        assert schema["$defs"]["CallAction"]["properties"]["tool"] == {
            "anyOf": [{"enum": list(TOOL_NAMES), "type": "string"}, {"type": "null"}], "default": None,
            "title": "Tool"}
    _, err = parse_planner_output('{"action": "call", "need": 0, "tool": 5}')
    assert err == ("schema error at call.tool: Input should be 'subtitle_grounding', 'audio_scouting', "
                   "'clip_grounding', 'frame_confirmation', 'web_search', 'page_reader' or 'code_executor'")
    with pytest.raises(ValueError, match=f"unknown tool 'teleport'; registered: .*{PLUGINS_ENV}"):
        check_tool_name("teleport")


def test_a_tool_name_the_planner_could_not_write_is_refused():
    for bad in ("my tool", "1st", "", "x" * 65, 'quo"te'):
        with pytest.raises(ValueError, match="letters, digits and _"):
            register_tool(bad)


def test_a_plugin_named_after_the_first_lookup_is_found_by_the_registry(tmp_path, monkeypatch):
    assert "late_reverse" not in TOOLS.names()  # the registry has looked its package up already
    monkeypatch.syspath_prepend(str(write_plugin(tmp_path / "plugins", "my_late_reverse", "late_reverse")))
    monkeypatch.setenv(PLUGINS_ENV, "my_late_reverse")
    try:
        assert TOOLS["late_reverse"].name == "late_reverse"  # a miss reads the variable again
    finally:
        TOOLS.unregister("late_reverse")
        sys.modules.pop("my_late_reverse", None)
