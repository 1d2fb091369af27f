"""docs/guide/own-tasks.md runs as written: its bash blocks, in order, in an empty folder, with a local stand-in for
the user's endpoint (it answers `GET /v1/models`, which is what the page's dry run asks). The real run needs a model
behind the endpoint: it is parsed, not run (tests/docs/test_front_door.py parses every command of the user pages).
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
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import tomllib

from omnidecision.protocol.registry import PLUGINS_ENV, PLUGINS_GROUP
from omnidecision.tasks.schema import Task
from omnidecision.tools.base import TOOLS
from omnidecision.tools.registry import build_tool_context, run_tool

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guide" / "own-tasks.md"


class _Models(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "my-model", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


REAL_RUN = "omnidecision eval --config my-tasks/eval.yaml"
MODULE = re.compile(r"cat > my-tools/my_tools.py <<'EOF'\n(.*?)\nEOF\n", re.S)


def bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", PAGE.read_text("utf-8"), re.S)


@pytest.mark.long  # five CLI processes (tasks check twice, eval --dry-run, tool): ~25 s
def test_the_walkthrough_runs(tmp_path):
    blocks = bash_blocks()
    assert len(blocks) == 8 and blocks[4].strip() == REAL_RUN
    server = HTTPServer(("127.0.0.1", 0), _Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # every block but the real run, in order, each after a marker line (its output is told from the others')
        script = "set -euo pipefail\n" + "\n".join(f"echo '::block {i}::'\n{b}" for i, b in enumerate(blocks)
                                                   if b.strip() != REAL_RUN)
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
    obs = json.loads(out["6"])
    assert (obs["tool"], obs["ok"], obs["text"], obs["fields"]) == ("unit_convert", True, "4.828 km", {"value": 4.828})
    assert "ok: 3 tasks in my-tasks/tasks.jsonl" in out["7"]


def test_the_pages_tool_runs_and_the_task_line_that_needs_it_loads(tmp_path, monkeypatch):
    blocks = bash_blocks()
    (tmp_path / "my_tools.py").write_text(MODULE.search(blocks[5])[1] + "\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(PLUGINS_ENV, "my_tools")
    try:
        ctx = build_tool_context(Task(id="t", question="?"))
        obs = asyncio.run(run_tool("unit_convert", {"query": "3 mi in km"}, ctx))
        assert (obs.ok, obs.text, obs.fields) == (True, "4.828 km", {"value": 4.828})
        bad = asyncio.run(run_tool("unit_convert", {"query": "3 furlongs"}, ctx))
        assert not bad.ok and bad.error.startswith("cannot convert '3 furlongs'")
    finally:
        TOOLS.unregister("unit_convert")
        sys.modules.pop("my_tools", None)
    line = re.search(r"<<'EOF'\n(\{.*\})\nEOF", blocks[7])[1]
    assert Task.model_validate_json(line).tools == ["unit_convert", "code_executor"]


def test_the_pages_entry_point_table_names_the_group_the_registry_reads():
    toml = re.search(r"```toml\n(.*?)```", PAGE.read_text("utf-8"), re.S)[1]
    assert tomllib.loads(toml)["project"]["entry-points"][PLUGINS_GROUP] == {"my_tools": "my_tools"}
