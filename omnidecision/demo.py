"""`omnidecision demo`: the whole pipeline on a CPU, offline, on its embedded default, with a results table.

    omnidecision demo --out runs/demo            # = make demo; ≈ 10–15 minutes on 2 CPU cores
    omnidecision demo --out runs/demo-q --quick  # a smaller smoke run (tests use it)

Stages, each one the project's own CLI command run as a subprocess (so every stage shows its own progress and
the recipes the demo writes under OUT/recipes/ can be rerun by hand):
synth (train + held-out suites) → collect with the noisy scripted teacher → harvest → tiny planner →
SFT → GRPO → export → eval in the loop with vLLM (untrained / SFT / GRPO planners; the other roles are the
noise-free teacher) and the teacher as planner, same held-out tasks and budgets → OUT/summary.json,
OUT/summary.md, and a side-by-side comparison (OUT/compare.md) of the four eval reports with their plots.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import typer
import yaml

logger = logging.getLogger(__name__)

PLANNERS = ("untrained", "sft", "grpo", "teacher")


@dataclass
class DemoConfig:
    """The embedded default. `quick` shrinks it for a smoke test."""

    train_tasks: int = 240
    heldout_tasks: int = 60
    samples: int = 2
    teacher_noise: float = 0.25
    digest_max_chars: int = 1000
    concurrency: int = 16
    # Measured on this 2-core machine: 300 SFT steps (≈ 3.5 min) leave the planner good in the loop but not
    # saturated on closure (700 steps reached 0.99, leaving GRPO nothing to raise); the GRPO stage (state
    # selection, 150 steps, three held-out evaluations) ≈ 2.7 min.
    sft_steps: int = 300
    grpo_steps: int = 150
    # GRPO samples its K decisions per state at this temperature (TRL scores them at it too): near the greedy
    # decoding the planner is evaluated and served with, so the group's differences are the ones greedy can flip.
    grpo_temperature: float = 0.7
    grpo_max_completion_length: int = 32
    closure_states: int = -1  # held-out RL states for the closure reward: -1 = every validation state
    seed: int = 0

    @classmethod
    def quick(cls) -> DemoConfig:
        return cls(train_tasks=40, heldout_tasks=8, samples=1, sft_steps=20, grpo_steps=2, closure_states=16)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "omnidecision.cli", *args]


class Stages:
    """Runs stage commands, streams their output, and records each stage's wall time."""

    def __init__(self, out: Path) -> None:
        self.out, self.times = out, {}
        self.log = out / "demo.log"

    def run(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> None:
        print(f"\n=== [{name}] {' '.join(cmd[3:] if cmd[:3] == _cli()[:3] else cmd)}", flush=True)
        t0 = time.perf_counter()
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"\n=== [{name}] {' '.join(cmd)}\n")
            log.flush()
            proc = subprocess.run(cmd, env={**os.environ, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)
        self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - t0
        tail = self.log.read_text("utf-8", errors="replace").splitlines()[-12:]
        for line in tail:
            # tqdm redraws with carriage returns: show the last state of each line only
            print("   " + line.rsplit("\r", 1)[-1][:160], flush=True)
        if proc.returncode != 0:
            raise typer.Exit(f"demo stage {name!r} failed (exit {proc.returncode}); see {self.log}") from None
        print(f"=== [{name}] done in {self.times[name]:.1f}s", flush=True)

    def timed(self, name: str):
        stages = self

        class _T:
            def __enter__(self):
                print(f"\n=== [{name}]", flush=True)
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                stages.times[name] = stages.times.get(name, 0.0) + time.perf_counter() - self.t0
                print(f"=== [{name}] done in {stages.times[name]:.1f}s", flush=True)

        return _T()


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    return path


def collect_recipe(cfg: DemoConfig, tasks: Path, out: Path) -> dict[str, Any]:
    return {
        "tasks": {"path": str(tasks), "format": "synthetic"},
        "backends": {"default": {"kind": "teacher", "options": {"noise": cfg.teacher_noise, "seed": cfg.seed}}},
        "agent": {"mode": "ledger", "step_budget": 15, "digest_max_chars": cfg.digest_max_chars},
        "samples": cfg.samples,
        "concurrency": cfg.concurrency,
        "out": str(out),
    }


def eval_recipe(cfg: DemoConfig, tasks: Path, out: Path, model: Path | None) -> dict[str, Any]:
    """The held-out evaluation: same tasks and budgets for every planner; the other roles are the teacher."""
    recipe = {
        "name": out.name,
        "tasks": {"path": str(tasks), "format": "synthetic"},
        "backends": {"default": {"kind": "teacher", "options": {"noise": 0.0, "seed": cfg.seed}}},
        "agent": {"mode": "ledger", "step_budget": 15, "digest_max_chars": cfg.digest_max_chars},
        "samples": 1,
        "concurrency": cfg.concurrency,
        "out": str(out),
    }
    if model is not None:
        recipe["serve"] = {"model": str(model), "max_model_len": 4096, "roles": ["planner"]}
        recipe["backends"]["planner"] = {"kind": "openai", "temperature": 0.0, "max_tokens": 64,
                                         "structured_output": True, "enable_thinking": False, "timeout_s": 60,
                                         "max_concurrency": cfg.concurrency}
    return recipe


def sft_recipe(cfg: DemoConfig, model: Path, data: Path, out: Path) -> dict[str, Any]:
    # The measured CPU regime (notes/cpu-stack.md): a 64x2 model, high lr, padded batches grouped by length.
    return {
        "model_name_or_path": str(model), "dtype": "float32", "attn_implementation": "sdpa",
        "dataset_name": str(data), "dataset_train_split": "train", "dataset_test_split": "validation",
        "output_dir": str(out), "assistant_only_loss": True, "max_length": 1024, "packing": False,
        "padding_free": False, "train_sampling_strategy": "group_by_length", "per_device_train_batch_size": 32,
        "gradient_accumulation_steps": 1, "learning_rate": 3.0e-3, "lr_scheduler_type": "cosine",
        "warmup_steps": 0.03, "weight_decay": 0.0, "max_grad_norm": 1.0, "max_steps": cfg.sft_steps,
        "gradient_checkpointing": False, "bf16": False, "use_cpu": True, "dataloader_num_workers": 0,
        "seed": cfg.seed, "logging_steps": 25, "eval_strategy": "no", "save_strategy": "no", "report_to": "none",
    }


def grpo_recipe(cfg: DemoConfig, model: Path, data: Path, out: Path) -> dict[str, Any]:
    return {
        "model_name_or_path": str(model), "dtype": "float32", "attn_implementation": "sdpa", "use_peft": False,
        "dataset_dir": str(data), "dataset_train_split": "train", "dataset_test_split": "validation",
        "reward_funcs": ["closure", "format"], "reward_weights": [1.0, 0.25],
        # every state the SFT planner decides wrongly + as many it gets right (omnidecision/rl/select.py), and
        # the mean of the weights over the last half of the run (omnidecision/rl/averaging.py): measured, these
        # two turn GRPO's seed-dependent ±0.04 into a steady gain (notes/cpu-stack.md)
        "select_states": "balanced", "select_right_ratio": 1.0,
        "weight_average": True, "weight_average_start": 0.5,
        "num_generations": 8, "per_device_train_batch_size": 32, "generation_batch_size": 32,
        "max_completion_length": cfg.grpo_max_completion_length, "temperature": cfg.grpo_temperature,
        "top_p": 1.0, "top_k": 0, "beta": 0.0,
        "loss_type": "dapo", "scale_rewards": "group", "mask_truncated_completions": True, "use_vllm": False,
        "chat_template_kwargs": {"enable_thinking": False}, "learning_rate": 2.0e-4,
        "lr_scheduler_type": "constant_with_warmup", "warmup_steps": 5, "max_grad_norm": 1.0,
        "max_steps": cfg.grpo_steps, "gradient_checkpointing": False, "bf16": False, "use_cpu": True,
        "dataloader_num_workers": 0, "seed": cfg.seed, "eval_closure_n": cfg.closure_states,
        "eval_closure_mode": "greedy", "eval_batch_size": 32, "output_dir": str(out), "logging_steps": 5,
        "log_completions": True, "num_completions_to_print": 0, "save_strategy": "no", "report_to": "none",
    }


def closure_rewards(untrained: Path, grpo_run: Path, rl_dir: Path, n: int,
                    max_new_tokens: int) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Held-out closure reward (greedy decisions) of each planner on the same validation RL states, and the
    paired per-state comparisons untrained → SFT and SFT → GRPO.

    The SFT and GRPO figures are the GRPO run's own `closure_eval.json` (its start and trained planner, scored on
    these states in that run; the exported checkpoints hold the same weights), so only the untrained planner is
    decoded here."""
    import datasets

    from omnidecision.rl.evaluate import heldout_closure_reward, paired_comparison

    report = json.loads((grpo_run / "closure_eval.json").read_text("utf-8"))
    val = datasets.load_dataset(str(rl_dir), split="validation")
    closure = {"untrained": heldout_closure_reward(str(untrained), val, n=n, mode="greedy",
                                                   max_new_tokens=max_new_tokens),
               "sft": report["start"], "grpo": report["trained"]}
    if len(closure["untrained"]["per_state"]) != len(closure["sft"]["per_state"]):
        raise RuntimeError(f"closure evaluation: {len(closure['untrained']['per_state'])} states for the untrained "
                           f"planner, {len(closure['sft']['per_state'])} in {grpo_run / 'closure_eval.json'}")
    paired = {"sft_vs_untrained": paired_comparison(closure["untrained"]["per_state"], closure["sft"]["per_state"]),
              "grpo_vs_sft": report["paired"]}
    return closure, paired


def summarise(out: Path, evals: dict[str, Path], closure: dict[str, dict[str, Any]], times: dict[str, float],
              cfg: DemoConfig, paired: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    planners = {}
    for name, folder in evals.items():
        report = json.loads((folder / "report.json").read_text("utf-8"))
        c = closure.get(name)
        planners[name] = {
            "accuracy": report["accuracy"], "ci95": report["ci95"], "n": report["n"],
            "outcomes": report["outcomes"],
            "heldout_closure_reward": None if c is None else c["closure"]["mean"],
            "heldout_closure_reward_std": None if c is None else c["closure"]["std"],
            "heldout_closure_reward_ci95": None if c is None else [c["closure"][k] for k in ("ci95_low", "ci95_high")],
            "heldout_valid_rate": None if c is None else c.get("valid_rate"),
            "invalid_action_rate": report.get("invalid_action_rate"),
            "report": str(folder / "report.json"),
        }
    summary = {"planners": planners, **planners, "heldout_closure_paired": paired or {},
               "stage_wall_s": {k: round(v, 1) for k, v in times.items()},
               "total_wall_s": round(sum(times.values()), 1), "config": asdict(cfg)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2), "utf-8")
    return summary


def table(summary: dict[str, Any]) -> str:
    rows = ["| planner | accuracy | 95% CI | n | outcomes | invalid-action rate | held-out closure reward |",
            "|---|---|---|---|---|---|---|"]
    for name in PLANNERS:
        p = summary["planners"].get(name)
        if p is None:
            continue
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(p["outcomes"].items()) if v)
        closure = "–" if p["heldout_closure_reward"] is None else f"{p['heldout_closure_reward']:.3f}"
        invalid = "–" if p["invalid_action_rate"] is None else f"{p['invalid_action_rate']:.3f}"
        rows.append(f"| {name} | {p['accuracy']:.3f} | [{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}] | {p['n']} | "
                    f"{outcomes} | {invalid} | {closure} |")
    for name, p in summary.get("heldout_closure_paired", {}).items():
        rows.append(f"\nHeld-out closure reward, {name.replace('_vs_', ' vs ')} on the same {p['n']} states: "
                    f"per-state Δ {p['delta_mean']:+.3f} (95% CI [{p['ci95_low']:+.3f}, {p['ci95_high']:+.3f}]), "
                    f"{p['wins']} better / {p['losses']} worse / {p['ties']} same, "
                    f"sign test p = {p['sign_test_p']:.3g}")
    times = ", ".join(f"{k} {v:.0f}s" for k, v in summary["stage_wall_s"].items())
    return "\n".join(rows) + f"\n\nStage wall times: {times} (total {summary['total_wall_s']:.0f}s)\n"


def demo(
    out: Path = typer.Option(Path("runs/demo"), help="output folder (everything the demo makes goes here)"),
    quick: bool = typer.Option(False, help="a small smoke run instead of the embedded default"),
    sft_steps: int | None = typer.Option(None, help="override the SFT steps"),
    grpo_steps: int | None = typer.Option(None, help="override the GRPO steps"),
) -> None:
    """Run synth → collect → harvest → tiny planner → SFT → GRPO → export → serve + eval on CPU, offline."""
    cfg = DemoConfig.quick() if quick else DemoConfig()
    cfg.sft_steps = sft_steps or cfg.sft_steps
    cfg.grpo_steps = grpo_steps or cfg.grpo_steps
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "offline")
    st = Stages(out)
    recipes, models, evals = out / "recipes", out / "models", out / "eval"

    # 1. tasks: a training suite and a held-out suite (different seeds: no task in both)
    st.run("synth", _cli("tasks", "synth", "--n", str(cfg.train_tasks), "--seed", str(cfg.seed),
                         "--out", str(out / "tasks-train")))
    st.run("synth", _cli("tasks", "synth", "--n", str(cfg.heldout_tasks), "--seed", str(cfg.seed + 1000),
                         "--out", str(out / "tasks-heldout")))

    # 2. collect with the noisy scripted teacher, then harvest state-SFT rows and RL states
    st.run("collect", _cli("collect", "--config", str(_write(recipes / "collect.yaml", collect_recipe(
        cfg, out / "tasks-train", out / "collect"))), "--no-progress"))
    st.run("harvest", _cli("harvest", str(out / "collect"), "--out", str(out / "data"), "--advancing-only",
                           "--dedup"))

    # 3. a from-scratch tiny planner (tokenizer trained on the harvested text), SFT, then GRPO from SFT
    st.run("tiny-planner", _cli("tiny-planner", "--out", str(models / "untrained"), "--data",
                                str(out / "data" / "sft"), "--heads", "2"))  # head_dim 32: vLLM-CPU needs it
    st.run("sft", _cli("sft", "--config", str(_write(recipes / "sft.yaml", sft_recipe(
        cfg, models / "untrained", out / "data" / "sft", models / "sft-run")))))
    st.run("grpo", _cli("grpo", "--config", str(_write(recipes / "grpo.yaml", grpo_recipe(
        cfg, models / "sft-run", out / "data", models / "grpo-run")))))

    # 4. export plain HF checkpoints with provenance cards
    st.run("export", _cli("export", str(models / "sft-run"), "--out", str(models / "sft")))
    st.run("export", _cli("export", str(models / "grpo-run"), "--out", str(models / "grpo")))

    # 5. held-out closure reward of each trained stage on the same validation RL states
    planners = {"untrained": models / "untrained", "sft": models / "sft", "grpo": models / "grpo"}
    with st.timed("closure-eval"):
        closure, paired = closure_rewards(models / "untrained", models / "grpo-run", out / "data" / "rl",
                                          cfg.closure_states, cfg.grpo_max_completion_length)
        for name, c in closure.items():
            print(f"   {name}: mean closure reward {c['closure']['mean']:.3f} ± {c['closure']['std']:.3f} "
                  f"on {c['n_states']} held-out states", flush=True)

    # 6. vLLM serves each planner back into the agent on the held-out suite; the teacher as reference
    folders = {}
    for name in PLANNERS:
        folders[name] = evals / name
        recipe = eval_recipe(cfg, out / "tasks-heldout", folders[name], planners.get(name))
        st.run(f"eval-{name}", _cli("eval", "--config", str(_write(recipes / f"eval-{name}.yaml", recipe)),
                                     "--no-progress"))
    st.run("compare", _cli("compare", *[str(folders[n]) for n in PLANNERS], "--out", str(out / "compare"),
                           "--title", "Held-out synthetic tasks: planner comparison"))

    summary = summarise(out, folders, closure, st.times, cfg, paired)
    text = table(summary)
    (out / "summary.md").write_text("# omnidecision demo\n\n" + text, "utf-8")
    print("\n" + text)
    print(f"summary: {out / 'summary.json'}; reports and plots under {evals}/*/")
