"""docs/guide/own-tasks.md runs as written: its bash blocks, in order, in an empty folder, with a local stand-in for
the user's endpoint (it answers `GET /v1/models`, which is what the page's dry run asks). The real run asks a scripted
stand-in for the model (`scripted_reply`): the test reads its trajectories for the call of the page's own tool.
The tool of one's own the page writes also runs in this process (quick), and its entry-point table is the group the
registry reads.

    pytest -q tests/docs/test_own_tasks_page.py
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import tomllib

from omnidecision.protocol.registry import PLUGINS_ENV, PLUGINS_GROUP
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import TOOLS
from omnidecision.tools.registry import build_tool_context, run_tool

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guide" / "own-tasks.md"


def scripted_reply(role_prompt: str, user: str, values: dict[str, str]) -> str:
    """The stand-in model: one need per question; the planner calls it (unit_convert on "3 mi in km" where the
    digest's TOOLS line lists that tool) and finishes once it may; the critic fills the need with the
    observation's first number (`values`, by question); the finalizer answers that value."""
    question = re.search(r"QUESTION: (.*)", user)[1]
    if role_prompt.startswith("You are the decomposer"):
        return json.dumps({"needs": [{"description": "the answer", "query_focus": question}]})
    if role_prompt.startswith("You are the planner"):
        if "finish_available=yes" in user:
            return '{"action": "finish"}'
        own = re.search(r"^TOOLS: .*\bunit_convert\b", user, re.M)  # the page's run-km task
        return json.dumps({"action": "call", "need": 0, **({"tool": "unit_convert", "query": "3 mi in km"}
                                                             if own else {})})
    if role_prompt.startswith("You are the critic"):
        number = re.search(r"\d+(?:\.\d+)?", user.split("OBSERVATION:", 1)[1])
        values[question] = number[0] if number else "unknown"
        return json.dumps({"verdicts": [{"need": 0, "verdict": "supports", "status": "filled",
                                         "value": values[question]}]})
    if role_prompt.startswith("You are the finalizer"):
        return json.dumps({"answer": values.get(question, "unknown"), "check": "pass"})
    raise AssertionError(f"an unexpected role: {role_prompt[:80]}")


class _Endpoint(BaseHTTPRequestHandler):
    """The user's endpoint: `GET /v1/models` (the dry run's question) and a scripted model behind
    `POST /v1/chat/completions` (`scripted_reply`)."""

    values: dict[str, str] = {}

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "my-model", "object": "model"}]})

    def do_POST(self) -> None:
        messages = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["messages"]
        text = scripted_reply(messages[0]["content"], messages[-1]["content"], self.values)
        self._send({"id": "c", "object": "chat.completion", "created": 0, "model": "my-model",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    def _send(self, doc: dict) -> None:
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


MODULE = re.compile(r"cat > my-tools/my_tools.py <<'EOF'\n(.*?)\nEOF\n", re.S)


def bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", PAGE.read_text("utf-8"), re.S)


@pytest.mark.long  # six CLI processes (tasks check twice, eval --dry-run, tool, eval): ~40 s
def test_the_walkthrough_runs(tmp_path):
    blocks = bash_blocks()
    assert len(blocks) == 8 and blocks[-1].strip() == "omnidecision eval --config my-tasks/eval.yaml"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # every block in order, each after a marker line (its output is told from the others')
        script = "set -euo pipefail\n" + "\n".join(f"echo '::block {i}::'\n{b}" for i, b in enumerate(blocks))
        script = script.replace("127.0.0.1:8000", f"127.0.0.1:{server.server_port}")
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        env.pop(PLUGINS_ENV, None)
        res = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
    finally:
        server.shutdown()
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    out = dict(re.findall(r"::block (\d+)::\n(.*?)(?=::block \d+::|\Z)", res.stdout, re.S))
    assert "ok: 2 tasks in my-tasks/tasks.jsonl" in out["1"]
    report = json.loads(out["3"])  # the dry run's JSON report
    checks = {c["what"]: c for c in report["checks"]}
    assert all(c["status"] == "ok" for c in report["checks"]), report["checks"]
    assert "answers GET /models" in checks["backends.default"]["detail"]
    assert "2 tasks" in checks["tasks"]["detail"]
    # the tool of one's own, from the user's module named in the variable, by name
    obs = json.loads(out["5"])
    assert (obs["tool"], obs["ok"], obs["text"], obs["fields"]) == ("unit_convert", True, "4.828 km", {"value": 4.828})
    assert "ok: 3 tasks in my-tasks/tasks.jsonl" in out["6"]
    # the run: three tasks against the endpoint; the planner called the own tool on the task that lists it
    runs = {r["task_id"]: r for f in (tmp_path / "runs/eval/my-endpoint").rglob("*.jsonl")
            for r in map(json.loads, f.read_text("utf-8").splitlines()) if "task_id" in r}
    assert set(runs) == {"mars-moons", "car-colour", "run-km"}, sorted(runs)
    km = runs["run-km"]
    assert [s["observation"]["tool"] for s in km["steps"] if s.get("observation")] == ["unit_convert"]
    assert km["steps"][0]["observation"]["text"] == "4.828 km" and km["answer"] == "4.828"
    assert all(s["observation"]["tool"] != "unit_convert" for r in ("mars-moons", "car-colour")
               for s in runs[r]["steps"] if s.get("observation"))
    assert (tmp_path / "runs/eval/my-endpoint/report.json").is_file()


def test_the_pages_tool_runs_and_the_task_line_that_needs_it_loads(tmp_path, monkeypatch):
    page = PAGE.read_text("utf-8")
    (tmp_path / "my_tools.py").write_text(MODULE.search(page)[1] + "\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(PLUGINS_ENV, "my_tools")
    try:
        ctx = build_tool_context(Task(id="t", question="?"))
        obs = asyncio.run(run_tool("unit_convert", {"query": "3 mi in km"}, ctx))
        assert (obs.ok, obs.text, obs.fields) == (True, "4.828 km", {"value": 4.828})
        bad = asyncio.run(run_tool("unit_convert", {"query": "3 furlongs"}, ctx))
        assert not bad.ok and bad.error.startswith("cannot convert '3 furlongs'")
        # the task line that needs it loads while the plugin is registered (a task's tools are checked when read)
        line = re.search(r'^\{"id": "run-km".*\}$', page, re.M)[0]
        assert Task.model_validate_json(line).tools == ["unit_convert", "code_executor"]
    finally:
        TOOLS.unregister("unit_convert")
        sys.modules.pop("my_tools", None)


def test_the_pages_entry_point_table_names_the_group_the_registry_reads():
    toml = re.search(r"```toml\n(.*?)```", PAGE.read_text("utf-8"), re.S)[1]
    assert tomllib.loads(toml)["project"]["entry-points"][PLUGINS_GROUP] == {"my_tools": "my_tools"}
