"""`omnidecision run --out F` holds F's lock from before the run to its line: a second writer on F (another `run`,
a collect) is refused up front with one line naming the holder, and F is left as it was.

    .venv/bin/pytest tests/reliability/test_run_one_writer.py -q
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.synth import write_suite

HOLD = """
import sys, time
from omnidecision.outputs import exclusive
with exclusive(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_run_on_a_file_another_process_writes_is_refused_and_appends_nothing(tmp_path: Path):
    write_suite(2, 0, tmp_path / "synth")
    task = load_tasks(tmp_path / "synth", "synthetic")[0]
    out = tmp_path / "runs.jsonl"
    argv = ["run", "--tasks", str(tmp_path / "synth"), "--task-id", task.id, "--teacher", "--out", str(out)]
    assert CliRunner().invoke(app, argv).exit_code == 0
    before = out.read_bytes()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        res = CliRunner().invoke(app, argv)
        assert res.exit_code == 2, res.output
        assert "another process is writing this --out" in res.output and f"pid {holder.pid}" in res.output.replace(
            '"pid": ', "pid "), res.output
        assert out.read_bytes() == before  # nothing appended
    finally:
        holder.kill()
        holder.wait()
    assert CliRunner().invoke(app, argv).exit_code == 0 and out.read_bytes().count(b"\n") == 2  # free again
