"""`make bench` on a fresh machine: it installs what its benchmarks need before running them, as `make test` does
(the view benchmark renders pages in chromium: `make browser`). Read from make's own dry run (`make -n`: prints the
recipe lines in order, runs nothing).

    .venv/bin/pytest tests/benchmarks/test_make_bench.py -q
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _plan(target: str) -> list[str]:
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the project's entry points are make targets)")
    res = subprocess.run(["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_make_bench_gets_chromium_before_the_benchmarks():
    lines = _plan("bench")
    run = next(i for i, line in enumerate(lines) if "bench.run_all" in line)
    browser = [i for i, line in enumerate(lines) if "command -v chromium" in line]
    assert browser and browser[0] < run, "make bench must run the browser target before bench.run_all"
    # the same step as `make test`
    assert any("command -v chromium" in line for line in _plan("test"))
    assert "make browser" in (ROOT / "bench" / "bench_view.py").read_text("utf-8")  # what its refusal names
