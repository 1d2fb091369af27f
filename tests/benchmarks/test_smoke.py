"""Every benchmark under bench/ runs at its smoke size (`--smoke`, bench/common.py) and writes a result of the one
schema (bench/schema.py), so a refactor cannot break a benchmark silently (issue 55: `make bench` failed on a private
function the reward refactor removed, and nothing noticed). Benchmarks use the project's public functions only
(read from their imports). The benchmarks are found by file name (bench/bench_*.py): a new one is covered without
editing this test.

A smoke run writes under BENCH_SMOKE_OUT (here the test's tmp folder), never over bench/results/. The view
benchmark renders in chromium (`make browser`): without it that case skips locally and fails under CI=true
(tests/conftest.py).

Two runs of each benchmark:
- fast: `main(["--smoke", ...])` in the test process, so torch, transformers and TRL load once for all of them
  (a process per benchmark spent most of its smoke time importing them); the two vLLM benchmarks (SERVER_OPTIONS)
  take the session's server (`vllm_server`, tests/conftest.py, which marks them `vllm`) with `--base-url` instead
  of starting their own; a new benchmark is in the first list, found by its file name;
- slow: `python -m bench.bench_NAME --smoke`, each in its own process, as `make bench` runs them: the command-line
  entry, and the benchmarks' own vLLM server start (6.5 min for the ten on a 2-core Xeon at load 5-7).

    pytest -q tests/benchmarks/test_smoke.py                 # every benchmark at its smoke size, in this process
    pytest -q -m slow tests/benchmarks/test_smoke.py         # the same from the command line, a process each
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import SMOKE_NOTE, SMOKE_OUT_ENV, unmeasured
from bench.run_all import BENCHMARKS
from bench.schema import BenchResult

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
NAMES = sorted(p.stem.removeprefix("bench_") for p in BENCH.glob("bench_*.py"))
# what a benchmark needs beyond the fast suite's own dependencies
MARKS = {"collect": [pytest.mark.vllm, pytest.mark.requires("vllm")],
         "serving": [pytest.mark.vllm, pytest.mark.requires("vllm")],
         "view": [pytest.mark.requires("playwright")]}
# A process per benchmark takes 6-105 s (torch and TRL imported again, a vLLM server start): `make slow-test` runs
# them; the fast suite runs the same smoke sizes in its own process: 85-115 s for the ten at load 6-7 with torch and
# TRL already imported, not counting the server's start (the more with that server idling beside them).
SLOW_MARKS = {name: [*MARKS.get(name, []), pytest.mark.slow] for name in NAMES}
# in-process, four run in `make long-test` (CI runs it), each 9-20 s on 2 cores, a stage the fast suite covers
# elsewhere: grpo_env (GRPO through the environment: tests/rl/test_environment.py), grpo_signal (GRPO with the judge:
# tests/rl), sft_layouts (SFT: tests/sft), view (the viewer in chromium: tests/view/test_browser.py); `make test`
# is near its 15 minutes on the slower CPU type (14:05 there at 9ccccdb)
IN_PROCESS_MARKS = {name: [*MARKS.get(name, []), pytest.mark.long] if name in
                    {"grpo_env", "grpo_signal", "sft_layouts", "view"} else MARKS.get(name, []) for name in NAMES}
# The vLLM benchmarks' options for an already running server: the session's, serving the tiny planner as `planner`.
SERVER_OPTIONS = {"collect": lambda server, model: ["--base-url", server.base_url,
                                                    "--served-model", server.served_name],
                  "serving": lambda server, model: ["--base-url", server.base_url,
                                                    "--served-model", server.served_name, "--model-dir", str(model)]}
NOT_IN_MAKE_BENCH = {"grpo_recipe"}  # a long ablation on a finished demo folder (bench/run_all.py says so)


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.json"))}


def _needs_chromium(name: str) -> None:
    if name == "view" and not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no chromium on PATH (make browser)")


# What a benchmark's details must show it timed, beyond its figures (its timers' per-function breakdown).
TIMED = {"rewards": lambda d: d["reward_seconds_by_func"] and all(
    by_func and all(s > 0 for s in by_func.values()) for by_func in d["reward_seconds_by_func"])}


def _check_result(folder: Path, name: str) -> BenchResult:
    """The one result file a smoke run writes: the schema's checks, marked as a smoke result, no NaN, and something
    measured: every figure above 0 but those the benchmark names as able to be 0 (bench/common.py: unmeasured; a
    timer that times nothing reports 0 s, as the rewards' did once), and the timers' breakdowns non-empty."""
    written = sorted(folder.glob("*.json"))
    assert [p.name for p in written] == [f"{name}.json"], written
    result = BenchResult.model_validate_json(written[0].read_text("utf-8"))  # the schema's own checks
    assert result.benchmark == name and result.repeats >= 3
    assert result.details.get("smoke") is True and result.notes[0] == SMOKE_NOTE  # a reader sees it measures nothing
    assert {result.candidate, result.baseline} <= set(result.arms)
    for arm in result.arms.values():
        for figure in arm.figures.values():
            assert len(figure.values) == result.repeats and all(v == v for v in figure.values)  # no NaN
    assert unmeasured(result.arms, result.details["may_be_zero"]) == []
    assert TIMED.get(name, bool)(result.details), result.details
    return result


def _run_in_process(name: str, argv: list[str], out: Path, monkeypatch: pytest.MonkeyPatch) -> BenchResult:
    """`bench.bench_NAME.main(argv)` here, as `python -m bench.bench_NAME ARGV` from the repository root would run
    it, its result under `out`; then its checks, and no real result touched."""
    real_results = _digest(BENCH / "results")
    monkeypatch.setenv(SMOKE_OUT_ENV, str(out))
    monkeypatch.setattr(sys, "argv", [str(BENCH / f"bench_{name}.py"), *argv])  # the result's `command` reads it
    monkeypatch.chdir(ROOT)
    environ = dict(os.environ)
    try:
        importlib.import_module(f"bench.bench_{name}").main(argv)
    finally:  # what a benchmark sets for its own process (HF_HUB_OFFLINE...) does not reach the next test
        os.environ.clear()
        os.environ.update(environ)
    result = _check_result(out, name)
    assert result.command.startswith(f"python -m bench.bench_{name} --smoke"), result.command
    assert _digest(BENCH / "results") == real_results  # no real result was touched
    return result


@pytest.mark.parametrize("name", [pytest.param(n, marks=IN_PROCESS_MARKS.get(n, [])) for n in NAMES
                                  if n not in SERVER_OPTIONS])
def test_every_benchmark_runs_at_its_smoke_size(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_chromium(name)
    _run_in_process(name, ["--smoke"], tmp_path / "results", monkeypatch)


@pytest.mark.parametrize("name", sorted(SERVER_OPTIONS))
def test_the_vllm_benchmarks_run_at_their_smoke_size_on_the_session_server(
        name: str, vllm_server, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _run_in_process(name, ["--smoke", *SERVER_OPTIONS[name](vllm_server, tiny_model_dir)],
                             tmp_path / "results", monkeypatch)
    assert any("already running server (--base-url)" in note for note in result.notes)  # the result says whose


@pytest.mark.parametrize("name", [pytest.param(n, marks=SLOW_MARKS[n]) for n in NAMES])
def test_every_benchmark_command_runs_at_its_smoke_size(name: str, tmp_path: Path) -> None:
    _needs_chromium(name)
    real_results = _digest(BENCH / "results")
    env = {**os.environ, SMOKE_OUT_ENV: str(tmp_path / "results"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-m", f"bench.bench_{name}", "--smoke"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    output = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, f"bench_{name} --smoke exited {proc.returncode}:\n{output}"
    _check_result(tmp_path / "results", name)
    assert _digest(BENCH / "results") == real_results  # no real result was touched


@pytest.mark.parametrize("name", NAMES)
def test_every_benchmark_answers_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every benchmark's options print (a stray `%` in a help text breaks --help only) and offer --smoke."""
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(f"bench.bench_{name}").main(["--help"])
    assert stop.value.code == 0 and "--smoke" in capsys.readouterr().out


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
