"""`rft-select` never deletes its input (issue 65: `rft-select --dataset_name D/harvest --out D` used to delete D,
the harvest, its data card and an unrelated file, and exit 0). Run as the user runs it, a real `omnidecision`
process, with --out the folder that holds its input and with --out inside the input: exit 2, one line on stderr
naming --out and the input, no traceback, and every file of D (an unrelated file planted there included)
byte-identical afterwards, no temp folder left beside it. Planted "rft-select forgets its inputs when it checks
--out" (`rl.dryrun.rft_inputs` returning []): both cases fail (the first on the message, the second ran on).

    .venv/bin/pytest tests/rl/test_rft_select_keeps_input.py -q -m long
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("trl")  # skips without it; fails under CI=true (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "omnidecision.cli"]


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (and every folder, as b"<dir>"), by relative path."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(folder.rglob("*"))}


@pytest.mark.long  # two real processes, ~15 s each (torch + trl imports): `make long-test` (CI runs it)
@pytest.mark.parametrize("where", ["holds", "inside"])
def test_rft_select_refuses_an_out_that_overlaps_its_input(where, tiny_planner, rl_dir, tmp_path):
    d = tmp_path / "D"
    harvest = d / "harvest"
    shutil.copytree(rl_dir, harvest)
    (d / "notes.txt").write_text("an unrelated file the user keeps here\n", encoding="utf-8")
    (harvest / "DATA_CARD.md").write_text("# the harvest's card\n", encoding="utf-8")
    out, how = (d, "contains") if where == "holds" else (harvest / "rft", "is inside")
    before, beside = _tree(d), sorted(p.name for p in tmp_path.iterdir())
    cmd = [*CLI, "rft-select", "--config", str(ROOT / "configs" / "grpo" / "tiny-cpu.yaml"), "--model_name_or_path",
           str(tiny_planner), "--dataset_name", str(harvest), "--out", str(out), "--max_steps", "1",
           "--num_generations", "2", "--per_device_train_batch_size", "2", "--generation_batch_size", "2",
           "--max_completion_length", "8", "--max-states", "2", "--checkpoint_policy", "final"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 2, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert len(lines) == 1, lines
    assert f"--out {out} {how} the input {harvest}" in lines[0], lines[0]
    assert _tree(d) == before, f"rft-select --out {out} changed the folder holding its input"
    assert sorted(p.name for p in tmp_path.iterdir()) == beside, "a temp folder was left beside D"
