"""Every bench/results/*.json validates against the one result schema (bench/schema.py) and carries no machine path;
the schema itself rejects inconsistent files (wrong summaries, a ratio that its figures do not give, too few
repeats, absolute paths)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from bench.schema import BenchResult, machine_paths

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
FILES = sorted(RESULTS.glob("*.json"))
ROOT = str(Path(__file__).resolve().parents[2])


def test_results_exist() -> None:
    names = {p.stem for p in FILES}
    assert {"grpo_signal", "prompt_tokens"} <= names, names


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_result_validates(path: Path) -> None:
    result = BenchResult.model_validate_json(path.read_text("utf-8"))
    assert result.benchmark == path.stem  # the file is named after the benchmark that wrote it
    assert result.repeats >= 3
    assert result.ratio is not None or result.ratio_note


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_no_machine_path(path: Path) -> None:
    text = path.read_text("utf-8")
    assert ROOT not in text and str(Path.home()) + "/" not in text
    assert machine_paths(json.loads(text)) == []


def test_grpo_signal_has_its_ratio() -> None:
    data = json.loads((RESULTS / "grpo_signal.json").read_text("utf-8"))
    assert "ratio" in data and data["candidate"] == "decision" and data["baseline"] == "trajectory"


# ---- the schema can fail --------------------------------------------------------------------------------------
def _valid() -> dict:
    fig = {"unit": "x", "values": [1.0, 2.0, 3.0], "min": 1.0, "median": 2.0}
    base = {"unit": "x", "values": [2.0, 2.0, 2.0], "min": 2.0, "median": 2.0}
    return {
        "benchmark": "t", "title": "t", "command": "python -m bench.t", "commit": "0123456789", "time": "now",
        "machine": {"cpus": 2, "memory_gib": 1.0, "cpu": "c", "platform": "p", "python": "3", "torch": None,
                    "vllm": None, "transformers": None, "trl": None, "load_avg_start": [0.0]},
        "repeats": 3,
        "arms": {"a": {"label": "a", "figures": {"m": fig}}, "b": {"label": "b", "figures": {"m": base}}},
        "candidate": "a", "baseline": "b", "metric": "m", "ratio_method": "median_of_repeat_ratios",
        "ratio": 1.0, "ratio_repeats": [0.5, 1.0, 1.5], "better": "higher is better here",
    }


def test_schema_accepts_a_consistent_result() -> None:
    assert BenchResult.model_validate(_valid()).ratio == 1.0


@pytest.mark.parametrize("change", [
    lambda d: d["arms"]["a"]["figures"]["m"].update(median=2.5),            # summary does not match the values
    lambda d: d.update(ratio=2.0),                                          # ratio not given by the figures
    lambda d: d.update(ratio_repeats=[0.5, 1.0, 9.0]),                      # a repeat's ratio is wrong
    lambda d: d.update(repeats=2),                                          # too few repeats
    lambda d: d.update(command="python " + "/".join(["", "work", "x", "bench", "t.py"])),  # machine path
    lambda d: d.update(details={"out": "/tmp/r.json"}),                     # machine path anywhere
    lambda d: d.update(ratio=None, ratio_repeats=[None, None, None]),       # null ratio the figures contradict
    lambda d: d.update(baseline="c"),                                       # unknown arm
], ids=["median", "ratio", "repeat-ratio", "repeats", "command-path", "detail-path", "null-ratio", "arm"])
def test_schema_rejects(change) -> None:
    data = _valid()
    change(data)
    with pytest.raises(ValidationError):
        BenchResult.model_validate(data)


def test_null_ratio_needs_a_note() -> None:
    data = _valid()
    data["arms"]["b"]["figures"]["m"] = {"unit": "x", "values": [0.0, -1.0, 0.0], "min": -1.0, "median": 0.0}
    data.update(ratio=None, ratio_repeats=[None, None, None], ratio_method="ratio_of_medians")
    with pytest.raises(ValidationError):
        BenchResult.model_validate(data)
    data["ratio_note"] = "the baseline did not improve"
    assert BenchResult.model_validate(data).ratio is None
