"""docs/guide/own-tasks.md runs as written: its bash blocks, in order, in an empty folder, with a local stand-in for
the user's endpoint (it answers `GET /v1/models`, which is what the page's dry run asks). The last block, the real
run, needs a model behind the endpoint: it is parsed, not run (tests/docs/test_front_door.py parses every command of
the user pages).

    pytest -q tests/docs/test_own_tasks_page.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

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


@pytest.mark.long  # two CLI processes (tasks check, eval --dry-run): ~17 s
def test_the_walkthrough_runs(tmp_path):
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text("utf-8"), re.S)
    assert len(blocks) == 5 and blocks[-1].strip() == "omnidecision eval --config my-tasks/eval.yaml"
    server = HTTPServer(("127.0.0.1", 0), _Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        script = "set -euo pipefail\n" + "\n".join(blocks[:-1]).replace(
            "127.0.0.1:8000", f"127.0.0.1:{server.server_port}")
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        res = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
    finally:
        server.shutdown()
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "ok: 2 tasks in my-tasks/tasks.jsonl" in res.stdout
    report = json.loads(res.stdout[res.stdout.index("{"):])  # the dry run's JSON report follows tasks check
    checks = {c["what"]: c for c in report["checks"]}
    assert all(c["status"] == "ok" for c in report["checks"]), report["checks"]
    assert "answers GET /models" in checks["backends.default"]["detail"]
    assert "2 tasks" in checks["tasks"]["detail"]
