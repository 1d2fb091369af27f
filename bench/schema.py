"""The one schema of every `bench/results/*.json` (tests/bench/test_results.py validates each file against it).

A result compares a *candidate* with a *baseline* measured in the same run, repeated (≥ 3 times), with every
repeat's raw figure kept:

- `arms`: each measured configuration (candidate, baseline, and any others the benchmark also reports) with its
  figures; a figure (`Measure`) holds one raw value per repeat, in repeat order, and their min and median;
- `metric`: the figure the ratio is taken on; `ratio` = candidate / baseline on that figure, computed per
  `ratio_method` (the median of the per-repeat ratios, when each repeat measures both sides; or the ratio of the
  two medians) and `ratio_repeats` the per-repeat ratios; `better` says what a higher ratio means;
- `command` (relative paths, reproducible), `commit`, `machine` (cores, memory, CPU load, library versions).

    python -m bench.schema bench/results/*.json     # validate files, print one line each
"""

from __future__ import annotations

import math
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 1
# An absolute path (POSIX, home-relative or a Windows drive) at the start of a string or after a space, quote,
# '=' or ':': a machine path that makes a result file depend on where it was produced.
_ROOTS = "home|root|tmp|work|Users|usr|var|opt|mnt|srv|scratch|data|private"
_MACHINE_PATH = re.compile(rf"""(?:^|[\s'"=:(])(?:/(?:{_ROOTS})\b|~/|[A-Za-z]:\\)""")


def machine_paths(value: Any, where: str = "") -> list[str]:
    """Every string inside `value` (nested dicts/lists) that holds a machine path, as 'where: text'.

    >>> machine_paths({"command": "python bench/x.py --out /tmp/r.json", "ok": ["runs/demo"]})
    ['command: python bench/x.py --out /tmp/r.json']
    """
    if isinstance(value, str):
        return [f"{where}: {value}"] if _MACHINE_PATH.search(value) else []
    if isinstance(value, dict):
        return [hit for k, v in value.items() for hit in machine_paths(v, f"{where}.{k}" if where else str(k))]
    if isinstance(value, (list, tuple)):
        return [hit for i, v in enumerate(value) for hit in machine_paths(v, f"{where}[{i}]")]
    return []


def _close(a: float | None, b: float | None, rel: float = 1e-3) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-6)


class Measure(BaseModel):
    """One figure, measured once per repeat."""

    model_config = ConfigDict(extra="forbid")

    unit: str = Field(..., description="unit of the values, e.g. tokens, s, decisions/s")
    values: list[float] = Field(..., min_length=1, description="raw value of each repeat, in repeat order")
    min: float
    median: float

    @model_validator(mode="after")
    def _summary_matches(self) -> Measure:
        if not (_close(self.min, min(self.values)) and _close(self.median, statistics.median(self.values))):
            raise ValueError(f"min/median ({self.min}, {self.median}) do not match the values {self.values}")
        return self


class Arm(BaseModel):
    """One measured configuration."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(..., description="what was run")
    figures: dict[str, Measure]


class Machine(BaseModel):
    """Where it ran. Load averages are read before and after: the machine may be shared."""

    model_config = ConfigDict(extra="forbid")

    cpus: int = Field(..., ge=1)
    memory_gib: float | None
    cpu: str
    platform: str
    python: str
    torch: str | None
    vllm: str | None
    transformers: str | None
    trl: str | None
    env: dict[str, str] = Field(default_factory=dict, description="threading variables in force (OMP_WAIT_POLICY…)")
    load_avg_start: list[float] = Field(..., description="1, 5 and 15 minute load averages when the run began")
    load_avg_end: list[float] = Field(default_factory=list, description="the same when it ended")


class BenchResult(BaseModel):
    """One benchmark's result file."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    benchmark: str = Field(..., description="the result file's stem")
    title: str
    command: str = Field(..., description="the command that wrote this file, run from the repository root")
    commit: str = Field(..., min_length=7, description="git commit of the code that ran (+'-dirty' if modified)")
    time: str
    machine: Machine
    repeats: int = Field(..., ge=3)
    arms: dict[str, Arm]
    candidate: str
    baseline: str
    metric: str = Field(..., description="the figure of both arms the ratio is computed on")
    ratio_method: Literal["median_of_repeat_ratios", "ratio_of_medians"]
    ratio: float | None = Field(..., description="candidate / baseline on `metric` (see ratio_method)")
    ratio_repeats: list[float | None] = Field(..., description="candidate / baseline within each repeat")
    better: str = Field(..., min_length=10, description="what a higher (or lower) ratio means")
    ratio_note: str | None = Field(None, description="why `ratio` is null, when it is")
    notes: list[str] = Field(default_factory=list, description="caveats a reader needs")
    details: dict[str, Any] = Field(default_factory=dict, description="benchmark-specific raw data")

    @model_validator(mode="after")
    def _consistent(self) -> BenchResult:
        for name in (self.candidate, self.baseline):
            if name not in self.arms:
                raise ValueError(f"arm {name!r} is not in arms {sorted(self.arms)}")
            if self.metric not in self.arms[name].figures:
                raise ValueError(f"arm {name!r} has no figure {self.metric!r}")
        for name, arm in self.arms.items():
            for fig, m in arm.figures.items():
                if len(m.values) != self.repeats:
                    raise ValueError(f"{name}.{fig}: {len(m.values)} values for {self.repeats} repeats")
        if len(self.ratio_repeats) != self.repeats:
            raise ValueError(f"ratio_repeats has {len(self.ratio_repeats)} values for {self.repeats} repeats")
        cand, base = self.arms[self.candidate].figures[self.metric], self.arms[self.baseline].figures[self.metric]
        for i, r in enumerate(self.ratio_repeats):
            expected = cand.values[i] / base.values[i] if base.values[i] > 0 else None
            if not _close(r, expected):
                raise ValueError(f"ratio_repeats[{i}] = {r}, but the repeat's figures give {expected}")
        if self.ratio_method == "median_of_repeat_ratios":
            known = [r for r in self.ratio_repeats if r is not None]
            expected = statistics.median(known) if len(known) == len(self.ratio_repeats) else None
        else:
            expected = cand.median / base.median if base.median > 0 else None
        if not _close(self.ratio, expected):
            raise ValueError(f"ratio = {self.ratio}, but {self.ratio_method} of the figures gives {expected}")
        if self.ratio is None and not self.ratio_note:
            raise ValueError("ratio is null: ratio_note must say why")
        paths = machine_paths(self.model_dump(mode="json"))
        if paths:
            raise ValueError(f"machine paths in the result: {paths[:3]}")
        return self


def sig(value: float, digits: int = 5) -> float:
    """`value` rounded to `digits` significant digits (storage: figures span 1e-5 … 1e5).

    >>> sig(0.000123456), sig(98765.4321)
    (0.00012346, 98765.0)
    """
    return float(f"{float(value):.{digits}g}")


def measure(values: list[float], unit: str) -> Measure:
    """A `Measure` of raw values (5 significant digits) with their min and median."""
    vals = [sig(v) for v in values]
    return Measure(unit=unit, values=vals, min=min(vals), median=sig(statistics.median(vals)))


def ratios(candidate: Measure, baseline: Measure, method: str) -> tuple[float | None, list[float | None]]:
    """(ratio, per-repeat ratios) of candidate over baseline; a repeat whose baseline is not > 0 has none."""
    per = [sig(c / b) if b > 0 else None for c, b in zip(candidate.values, baseline.values, strict=True)]
    if method == "median_of_repeat_ratios":
        ratio = sig(statistics.median(per)) if per and all(r is not None for r in per) else None
    else:
        ratio = sig(candidate.median / baseline.median) if baseline.median > 0 else None
    return ratio, per


def load_result(path: str | Path) -> BenchResult:
    return BenchResult.model_validate_json(Path(path).read_text("utf-8"))


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        r = load_result(arg)
        print(f"{arg}: ok ({r.benchmark}: {r.candidate} / {r.baseline} on {r.metric} = {r.ratio}, "
              f"{r.repeats} repeats)")
