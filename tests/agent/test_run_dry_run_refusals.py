"""`omnidecision run --dry-run` refuses what `run` refuses, in the same words (one function each, called by both):
another process writing --out (`agent.cli.out_busy`, asked without taking the lock), an unknown backend kind and a
`local` planner folder that is missing or holds no checkpoint (`backends.factory.backend_problem` per role, in
`agent.cli.run_backends`; no weights loaded).
Before, the dry run exited 0 for all three; the run refused the lock and the kind, and met the empty folder only at
its first request.

    .venv/bin/pytest -q -p no:cacheprovider tests/agent/test_run_dry_run_refusals.py
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.tasks.synth import write_suite


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_suite(2, 0, tmp_path_factory.mktemp("run-refusals") / "synth")


def _both(args: list[str]) -> tuple[list[str], list[str]]:
    """The error lines of the dry run and of the run, each checked to exit 2."""
    dry = CliRunner().invoke(app, [*args, "--dry-run"])
    real = CliRunner().invoke(app, args)
    assert dry.exit_code == 2 and real.exit_code == 2, (dry.output, real.output)
    return ([line for line in dry.stderr.splitlines() if line.startswith("error:")],
            [line for line in real.stderr.splitlines() if line.startswith("error:")])


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """tmp_path/one.jsonl locked by another process (as a second `run` on it would be): the file and its pid."""
    out = tmp_path / "one.jsonl"
    code = ("import sys\nfrom omnidecision.outputs import exclusive\n"
            f"with exclusive({str(out)!r}):\n    print('held', flush=True)\n    sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield out, proc.pid
    finally:
        proc.communicate(input="", timeout=30)  # stdin closed: it leaves the block and releases the lock


def test_the_dry_run_names_the_process_that_holds_out(synth: Path, held: tuple[Path, int]) -> None:
    out, pid = held
    dry, real = _both(["run", "--tasks", str(synth), "--teacher", "--out", str(out)])
    assert dry == real and len(dry) == 1, (dry, real)
    assert f"pid {pid}" in dry[0] and "another process is writing this --out" in dry[0]
    assert not out.exists()  # the run appended nothing


@pytest.mark.parametrize(("spec", "says"), [
    ("{kind: no-such-kind}", "backends.planner: unknown backend kind"),
    ("{kind: local, model: MISSING}", "backends.planner: backend kind 'local': model folder"),
    ("{kind: local, model: EMPTY}", "holds no config.json (a checkpoint) and no adapter_config.json"),
])
def test_the_dry_run_refuses_the_backends_the_run_refuses(synth: Path, tmp_path: Path, spec: str, says: str) -> None:
    (tmp_path / "empty").mkdir()  # a folder, but no checkpoint in it
    spec = spec.replace("MISSING", str(tmp_path / "none")).replace("EMPTY", str(tmp_path / "empty"))
    backends = tmp_path / "backends.yaml"
    backends.write_text(f"default: {{kind: teacher}}\nplanner: {spec}\n", "utf-8")
    out = tmp_path / "one.jsonl"
    dry, real = _both(["run", "--tasks", str(synth), "--backends", str(backends), "--out", str(out)])
    assert dry == real and len(dry) == 1 and says in dry[0] and str(backends) in dry[0], (dry, real)
    assert not out.exists()


def test_a_good_local_folder_passes_the_dry_run_without_loading_it(synth: Path, tmp_path: Path) -> None:
    (tmp_path / "planner").mkdir()
    (tmp_path / "planner" / "config.json").write_text("{}", "utf-8")  # no weights: a load would fail
    backends = tmp_path / "backends.yaml"
    backends.write_text(f"default: {{kind: teacher}}\nplanner: {{kind: local, model: {tmp_path / 'planner'}}}\n",
                        "utf-8")
    res = CliRunner().invoke(app, ["run", "--tasks", str(synth), "--backends", str(backends), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert '"kind": "local"' in res.stdout
