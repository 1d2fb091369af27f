"""A benchmark that measured nothing fails loudly and writes nothing (bench/common.py: `unmeasured`, `Run.timer`,
`NothingMeasured`), every benchmark goes through that one check, and the rewards benchmark's timer fires on what
TRL's GRPOTrainer calls (issue 65: its old timer patched a name rl/train.py no longer looked up, and `make bench`
wrote the rewards' share of a GRPO step as 0.0).

    .venv/bin/pytest -q tests/benchmarks/test_measured.py
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import NothingMeasured, Run, unmeasured
from bench.schema import Arm, measure

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def _arms(reward: list[float], step: list[float] | None = None) -> dict[str, Arm]:
    return {"reward": Arm(label="rewards", figures={"seconds_per_step": measure(reward, "s/step")}),
            "grpo_step": Arm(label="a step", figures={"seconds_per_step": measure(step or [1.0, 1.1, 0.9], "s/step")})}


def _result(run: Run, arms: dict[str, Arm], **kwargs) -> object:
    return run.result(title="t", arms=arms, candidate="reward", baseline="grpo_step", metric="seconds_per_step",
                      better="lower: a share of the step", repeats=3, **kwargs)


@pytest.mark.parametrize("values, repeats", [([0.0, 0.0, 0.0], "1, 2, 3"), ([0.1, 0.0, 0.2], "2"),
                                             ([0.1, -0.2, 0.2], "2")])
def test_a_figure_not_above_zero_is_named_with_its_repeats(values: list[float], repeats: str) -> None:
    expected = f"reward.seconds_per_step = {values} s/step: not above 0 in repeats {repeats}"
    assert unmeasured(_arms(values)) == [expected]


def test_infinite_figures_empty_arms_and_stale_exemptions_are_named() -> None:
    arms = {"a": Arm(label="a", figures={"gain": measure([float("inf"), 0.1, 0.2], "accuracy")}),
            "b": Arm(label="b", figures={})}
    assert unmeasured(arms, may_be_zero=["gain", "gone"]) == [
        "a.gain = [inf, 0.1, 0.2] accuracy: not finite in repeats 1", "b: no figures",
        "may_be_zero names 'gone', a figure no arm has"]
    assert unmeasured({}) == ["no arms"]


def test_a_named_figure_may_be_zero_or_negative() -> None:
    arms = {"a": Arm(label="a", figures={"gain": measure([0.0, -0.1, 0.2], "accuracy"),
                                         "cpu_s": measure([1.0, 2.0, 3.0], "CPU-s")})}
    assert unmeasured(arms, may_be_zero=["gain"]) == []
    assert unmeasured(arms) == ["a.gain = [0.0, -0.1, 0.2] accuracy: not above 0 in repeats 1, 2"]


def test_run_result_refuses_a_zero_figure_and_writes_nothing(tmp_path: Path) -> None:
    run = Run("rewards", smoke=True)
    with pytest.raises(NothingMeasured, match=r"^bench rewards measured nothing, no result written: "
                                              r"reward\.seconds_per_step = \[0\.0, 0\.0, 0\.0\]"):
        _result(run, _arms([0.0, 0.0, 0.0]))
    result = _result(run, _arms([0.01, 0.02, 0.01]))  # measured: the result carries what may be zero
    assert result.details["may_be_zero"] == [] and result.ratio is not None


def test_a_timer_that_never_fired_stops_the_result() -> None:
    run = Run("rewards", smoke=True)
    timer = run.timer("reward calls")
    with pytest.raises(NothingMeasured, match="the timer of reward calls never fired"):
        _result(run, _arms([0.01, 0.02, 0.01]))
    timer.add(0.5, key=1, name="closure_reward")
    with pytest.raises(NothingMeasured, match=r"did not fire at \[2\]"):
        timer.require([1, 2])
    timer.add(0.25, key=2, name="closure_reward")
    timer.require([1, 2])
    assert timer.by_name([2]) == {"closure_reward": 0.25} and timer.seconds(1) == 0.5
    _result(run, _arms([0.01, 0.02, 0.01]))


def test_nothing_measured_ends_a_benchmark_command_with_one_line() -> None:
    code = ("from bench.common import NothingMeasured\n"
            "raise NothingMeasured('bench x measured nothing, no result written: a.b = [0.0] s: not above 0')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["bench x measured nothing, no result written: a.b = [0.0] s: "
                                                "not above 0"]


def _builds_its_result(path: Path) -> bool:
    calls = [node.func for node in ast.walk(ast.parse(path.read_text("utf-8"))) if isinstance(node, ast.Call)]
    through_run = any(isinstance(f, ast.Attribute) and f.attr == "result" for f in calls)
    by_hand = any(isinstance(f, ast.Name) and f.id == "BenchResult" for f in calls)
    return through_run and not by_hand


@pytest.mark.parametrize("path", sorted(BENCH.glob("bench_*.py")), ids=lambda p: p.stem)
def test_every_benchmark_builds_its_result_through_the_one_check(path: Path) -> None:
    assert _builds_its_result(path), f"{path.name}: build the result with Run.result (its check), not BenchResult"


def test_the_reward_timer_fires_inside_trls_reward_block_only() -> None:
    """TRL's profiler as GRPOTrainer uses it: the reward functions' blocks open inside `_calculate_rewards`; the
    generation's block, outside it, is not a reward call."""
    from trl.extras.profiling import ProfilingContext

    from bench.bench_rewards import reward_timer

    timer = Run("rewards", smoke=True).timer("reward calls")
    with reward_timer(timer):
        with ProfilingContext("GRPOTrainer.transformers.generate_batch", [], step=3):
            pass
        with ProfilingContext("GRPOTrainer._calculate_rewards", [], step=3):
            for name in ("closure_reward", "format_reward"):
                with ProfilingContext(f"GRPOTrainer.{name}", [], step=3):
                    pass
    with ProfilingContext("GRPOTrainer._calculate_rewards", [], step=4):  # after the block: not timed
        with ProfilingContext("GRPOTrainer.closure_reward", [], step=4):
            pass
    assert [(k, n) for k, n, _ in timer.firings] == [(3, "closure_reward"), (3, "format_reward")]
    timer.require([3])
