"""Every benchmark under bench/ runs at its smoke size (`--smoke`, bench/common.py) and writes a result of the one
schema (bench/schema.py), so a refactor cannot break a benchmark silently (issue 55: `make bench` failed on a private
function the reward refactor removed, and nothing noticed). Benchmarks use the project's public functions only
(read from their imports). The benchmarks are found by file name (bench/bench_*.py): a new one is covered without
editing this test.

A smoke run writes under BENCH_SMOKE_OUT (here the test's tmp folder), never over bench/results/. The serving and
collection benchmarks start a vLLM server (marked `vllm`); the view benchmark renders in chromium (`make browser`):
without it that case skips locally and fails under CI=true (tests/conftest.py). The smoke runs are `slow` (6.6 min
for the ten): the fast suite imports every benchmark, parses its options and checks its imports are public.

    pytest -q tests/benchmarks/test_smoke.py                 # the fast checks
    pytest -q -m slow tests/benchmarks/test_smoke.py         # every benchmark at its smoke size
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import SMOKE_NOTE, SMOKE_OUT_ENV
from bench.run_all import BENCHMARKS
from bench.schema import BenchResult

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
NAMES = sorted(p.stem.removeprefix("bench_") for p in BENCH.glob("bench_*.py"))
# what a benchmark needs beyond the fast suite's own dependencies
MARKS = {"collect": [pytest.mark.vllm, pytest.mark.requires("vllm")],
         "serving": [pytest.mark.vllm, pytest.mark.requires("vllm")],
         "view": [pytest.mark.requires("playwright")]}
# A smoke run takes 15-75 s each (a vLLM server start, GRPO and SFT runs; 6.6 min for the ten on a 2-core Xeon), over
# the fast suite's time bound: `make slow-test` runs them; the fast suite imports every benchmark and parses its
# options (test_every_benchmark_imports_and_parses_its_options), which is what a refactor breaks first.
for _name in NAMES:
    MARKS[_name] = [*MARKS.get(_name, []), pytest.mark.slow]
NOT_IN_MAKE_BENCH = {"grpo_recipe"}  # a long ablation on a finished demo folder (bench/run_all.py says so)


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.json"))}


@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, [])) for n in NAMES])
def test_every_benchmark_runs_at_its_smoke_size(name: str, tmp_path: Path) -> None:
    if name == "view" and not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no chromium on PATH (make browser)")
    real_results = _digest(BENCH / "results")
    env = {**os.environ, SMOKE_OUT_ENV: str(tmp_path / "results"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-m", f"bench.bench_{name}", "--smoke"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    output = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, f"bench_{name} --smoke exited {proc.returncode}:\n{output}"
    written = sorted((tmp_path / "results").glob("*.json"))
    assert [p.name for p in written] == [f"{name}.json"], written
    result = BenchResult.model_validate_json(written[0].read_text("utf-8"))  # the schema's own checks
    assert result.benchmark == name and result.repeats >= 3
    assert result.details.get("smoke") is True and result.notes[0] == SMOKE_NOTE  # a reader sees it measures nothing
    assert {result.candidate, result.baseline} <= set(result.arms)
    for arm in result.arms.values():
        for figure in arm.figures.values():
            assert len(figure.values) == result.repeats and all(v == v for v in figure.values)  # no NaN
    assert _digest(BENCH / "results") == real_results  # no real result was touched


@pytest.mark.parametrize("name", NAMES)
def test_every_benchmark_imports_and_parses_its_options(name: str) -> None:
    """Every benchmark module imports (a name it imports from the project still exists) and answers --help."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-m", f"bench.bench_{name}", "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "--smoke" in proc.stdout, (proc.stdout + proc.stderr)[-3000:]


def test_make_bench_runs_every_benchmark_but_the_named_long_one() -> None:
    assert set(BENCHMARKS) == set(NAMES) - NOT_IN_MAKE_BENCH
    for name, argv in BENCHMARKS.items():
        assert argv[:2] == ["-m", f"bench.bench_{name}"], argv


def _private_uses(path: Path) -> list[str]:
    """`from omnidecision... import _x`, and `m._x` where `m` was imported from omnidecision, in one file."""
    tree = ast.parse(path.read_text("utf-8"))
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("omnidecision"):
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"{path.name}:{node.lineno}: from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("omnidecision"):
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            found.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_benchmarks_use_public_functions_only() -> None:
    found = [hit for path in sorted(BENCH.glob("*.py")) for hit in _private_uses(path)]
    assert found == []


def test_the_private_use_check_can_fail(tmp_path: Path) -> None:
    planted = tmp_path / "bench_x.py"
    planted.write_text("from omnidecision.rewards.decision import _ledger_from_json\n"
                       "import omnidecision.rewards as rewards\nrewards._private()\n", "utf-8")
    assert len(_private_uses(planted)) == 2
