"""`omnidecision replay`: exact replay passes; tampering names run and step; bad lines name file:line."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.cli import app

from .scripted import Scripted, critic_from, echo_tool, finalizer_pass, greedy_planner
from .test_loop import TASK, TWO_HOPS


def _record_lines(tmp_path):
    b = Scripted(decompose=TWO_HOPS, planner=greedy_planner, critic=critic_from({0: "Ada", 1: "1815"}),
                 finalizer=finalizer_pass)
    records = [asyncio.run(run_task(TASK, AgentConfig(), {"default": b}, tool_runner=echo_tool, run_id=f"r{i}"))
               for i in range(2)]
    return [json.loads(r.model_dump_json()) for r in records]


def _write(tmp_path, rows) -> str:
    path = tmp_path / "runs.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def test_replay_ok(tmp_path):
    result = CliRunner().invoke(app, ["replay", _write(tmp_path, _record_lines(tmp_path))])
    assert result.exit_code == 0 and "ok: 2 runs replay exactly" in result.output


def test_tampered_snapshot_names_run_and_step(tmp_path):
    rows = _record_lines(tmp_path)
    rows[1]["steps"][1]["ledger"]["needs"][0]["value"] = "Byron"
    result = CliRunner().invoke(app, ["replay", _write(tmp_path, rows)])
    assert result.exit_code == 1
    assert "MISMATCH run r1 step 1: snapshot differs" in result.output and "Byron" in result.output


def test_dropped_event_and_final_ledger_mismatch(tmp_path):
    rows = _record_lines(tmp_path)
    del rows[0]["steps"][0]["events"][0]  # the tool call: attempts and counts no longer match at step 1
    result = CliRunner().invoke(app, ["replay", _write(tmp_path, rows)])
    assert result.exit_code == 1 and "run r0 step 1" in result.output
    rows = _record_lines(tmp_path)
    rows[0]["final_ledger"]["answer"] = "1816"
    result = CliRunner().invoke(app, ["replay", _write(tmp_path, rows)])
    assert result.exit_code == 1 and "run r0 step final: final ledger differs" in result.output


def test_an_event_the_reducer_rejects_is_a_mismatch(tmp_path):
    rows = _record_lines(tmp_path)
    rows[0]["steps"][0]["events"][0]["need"] = 9
    result = CliRunner().invoke(app, ["replay", _write(tmp_path, rows)])
    assert result.exit_code == 1 and "run r0 step 0: event 0 (tool_call) rejected on replay" in result.output


def test_malformed_lines_name_file_and_line(tmp_path):
    rows = _record_lines(tmp_path)
    path = _write(tmp_path, [rows[0], "", "{not json"])
    result = CliRunner().invoke(app, ["replay", path])
    assert result.exit_code == 2 and f"{path}:3:" in result.output
    rows[1]["steps"][0]["events"][0]["kind"] = "teleport"
    path = _write(tmp_path, [rows[0], rows[1]])
    result = CliRunner().invoke(app, ["replay", path])
    assert result.exit_code == 2 and f"{path}:2: steps.0.events.0" in result.output
    assert CliRunner().invoke(app, ["replay", str(tmp_path / "missing.jsonl")]).exit_code == 2


# issue 65: each of these was a traceback (binary, UTF-16) or "ok: 0 runs" with exit 0 (empty) on 53b5bfd
@pytest.mark.parametrize("kind, expect", [
    ("binary", ":1: NUL bytes: a binary or UTF-16 file; a trajectory file is UTF-8 JSONL"),
    ("latin-1", ":2: not UTF-8 text (byte 13 of the line: b'\\xe9'); a trajectory file is UTF-8 JSONL"),
    ("utf-16", ":1: UTF-16 text (a byte-order mark); a trajectory file is UTF-8 JSONL"),
    ("empty", ": no records (an empty file): nothing to replay"),
    ("blank lines", ": no records (an empty file): nothing to replay"),
])
def test_a_file_that_is_not_utf8_jsonl_gets_one_line_naming_it(kind, expect, tmp_path):
    good = json.dumps(_record_lines(tmp_path)[0])
    path = tmp_path / "runs.jsonl"
    content = {"binary": bytes(range(256)) * 16, "utf-16": (good + "\n").encode("utf-16"), "empty": b"",
               "latin-1": (good + "\n").encode() + '{"run_id": "é"}\n'.encode("latin-1"), "blank lines": b"\n  \n"}
    path.write_bytes(content[kind])
    result = CliRunner().invoke(app, ["replay", str(path)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.output.splitlines() == [f"error: {path}{expect}"]
