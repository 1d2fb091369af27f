"""The pipeline's first stages at bench scale, shared by the benchmarks that need real harvested data or a real
SFT planner: the synthetic suite (through the `omnidecision tasks synth` command itself, so a bench picks up
whatever task mix that command generates), a scripted-teacher collection, the harvest, and a tiny planner trained
with the shipped SFT recipe.

    python -m bench.bench_grpo_signal      # uses every helper here (so do bench_sft_layouts, bench_collect)
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from omnidecision.rollout.engine import run_rollouts
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.runner import run_tasks

ROOT = Path(__file__).resolve().parent.parent
DIGEST_MAX_CHARS = 1000  # the demo's digest budget: collection, harvest, rollouts and evaluation all use it


def synth_suite(n: int, seed: int, out: Path) -> list[Any]:
    """`omnidecision tasks synth --n N --seed S --out OUT`, then the tasks as the loaders read them."""
    from omnidecision.tasks.loaders import load_tasks

    subprocess.run([sys.executable, "-m", "omnidecision.cli", "tasks", "synth", "--n", str(n), "--seed", str(seed),
                    "--out", str(out)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return load_tasks(out, "synthetic")


def teacher_harvest(tasks: list[Any], work: Path, *, noise: float = 0.25, samples: int = 2,
                    val_fraction: float = 0.1, seed: int = 0, teacher: dict[str, Any] | None = None,
                    tasks_path: Path | None = None) -> Path:
    """Collect the noisy scripted teacher on `tasks` and harvest it (advancing rows only, deduplicated, as the
    demo does); returns the harvest folder holding `sft/` and `rl/`. `teacher`: the teacher's options instead of
    `noise` (e.g. `backends.teacher.HABIT_TEACHER`, the demo's collection teacher), seeded by `seed`.
    `tasks_path`: the folder `tasks` were loaded from; given, the collection goes through its collect recipe
    (`rollout.engine.run_rollouts`, as `omnidecision collect`), which writes the manifest.json a run resumes from (the
    executed returns of grounding/ need it)."""
    from omnidecision.agent.config import AgentConfig
    from omnidecision.collect.harvest import HarvestOptions, run_harvest

    options = {**(teacher if teacher is not None else {"noise": noise}), "seed": seed}
    if tasks_path is None:
        from omnidecision.backends.factory import build_backends
        from omnidecision.protocol.chat import BackendSpec

        backends = build_backends({"default": BackendSpec(kind="teacher", options=options)})
        config = AgentConfig(digest_max_chars=DIGEST_MAX_CHARS)
        asyncio.run(run_tasks(tasks, config, backends, RolloutOptions(
            out_file=work / "runs" / "trajectories.jsonl", samples=samples, concurrency=8, progress=False)))
    else:
        from omnidecision.rollout.recipe import recipe_from_dict

        recipe = recipe_from_dict({
            "tasks": {"path": str(tasks_path), "format": "synthetic"},
            "backends": {"default": {"kind": "teacher", "options": options}},
            "agent": AgentConfig(digest_max_chars=DIGEST_MAX_CHARS).model_dump(mode="json"),
            "samples": samples, "concurrency": 8, "out": str(work / "runs"), "progress": False}, "bench.pipeline")
        asyncio.run(run_rollouts(recipe))
    run_harvest([str(work / "runs")], work / "data", HarvestOptions(
        advancing_only=True, dedup=True, val_fraction=val_fraction, digest_max_chars=DIGEST_MAX_CHARS))
    return work / "data"


def sft_planner(data: Path, work: Path, *, steps: int, seed: int = 0, extra: list[str] | None = None,
                heads: int = 2) -> Path:
    """A tiny planner (tokenizer trained on the harvest, 2 heads by default: vLLM-CPU's head size) trained with
    configs/sft/tiny-cpu.yaml for `steps` steps, evaluation and checkpoints off; returns the model folder."""
    from omnidecision.sft.config import parse_args
    from omnidecision.sft.train import main as sft_main
    from omnidecision.synthetic.tiny import build_tiny_planner, harvest_texts

    untrained = build_tiny_planner(work / "untrained", texts=harvest_texts(data / "sft"), heads=heads, seed=seed)
    out = work / "sft"
    sft_main(*parse_args(["--config", str(ROOT / "configs/sft/tiny-cpu.yaml"), "--model_name_or_path",
                          str(untrained), "--dataset_name", str(data / "sft"), "--output_dir", str(out),
                          "--max_steps", str(steps), "--eval_strategy", "no", "--save_strategy", "no",
                          "--logging_steps", str(max(1, steps // 4)), "--seed", str(seed), *(extra or [])]))
    return out
