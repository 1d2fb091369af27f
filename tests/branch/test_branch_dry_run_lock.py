"""`omnidecision branch --dry-run` asks whether another process is writing --out, as the run does before it takes
the lock (`outputs.check_free`, one function for both): both exit 2 with the same line naming the holder's pid, and
nothing is appended. Before, the dry run did not ask and exited as if the run could write.

    .venv/bin/pytest -q -p no:cacheprovider tests/branch/test_branch_dry_run_lock.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from omnidecision.cli import app


def test_the_dry_run_refuses_an_out_another_process_writes(tmp_path: Path) -> None:
    out = tmp_path / "branches.jsonl"
    code = ("import sys\nfrom omnidecision.outputs import exclusive\n"
            f"with exclusive({str(out)!r}):\n    print('held', flush=True)\n    sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    args = ["branch", "--trajectories", str(tmp_path / "runs" / "trajectories.jsonl"), "--run-id", "r0", "--step", "0",
            "--recorded", "--out", str(out)]
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        dry = CliRunner().invoke(app, [*args, "--dry-run"])
        real = CliRunner().invoke(app, args)
    finally:
        holder.communicate(input="", timeout=30)  # stdin closed: it leaves the block and releases the lock
    assert dry.exit_code == 2 and real.exit_code == 2, (dry.output, real.output)
    assert dry.stderr == real.stderr and not dry.stdout, (dry.stderr, real.stderr)
    assert f"pid {holder.pid}" in dry.stderr and "another process is writing this --out" in dry.stderr
    assert not out.exists()
    # with the holder gone the lock no longer refuses: the next problem is the parent file, not the lock
    after = CliRunner().invoke(app, [*args, "--dry-run"])
    assert after.exit_code == 2 and "another process" not in after.stderr, after.stderr
