"""P7 against TRL's own multi-turn GRPO: decision-level GRPO vs `GRPOTrainer(environment_factory=LedgerEnvironment)`.

The successor of `bench_grpo_signal`'s comparison: the baseline is no longer the project's home-made trajectory
GRPO (bench/trajectory_grpo.py, kept as a cross-check of the gradient there) but what a TRL user would run, the
ledger agent as a TRL environment (omnidecision/rollout/environment.py, `configs/grpo/tiny-cpu-env.yaml`), through the
same `omnidecision.rl.train.main`.

Setup (once, in neither budget): training and dev suites (`omnidecision tasks synth`, distinct seeds), the noisy
teacher collected and harvested on both, the START planner SFT-trained on the training harvest
(bench/pipeline.py). Per repeat (a seed), both arms from START for the same CPU-second budget, in alternating
order, with the same generation settings (K, temperature, top_p/top_k) and optimizer recipe, tail weight averaging
over the last half of the budget in both:

(a) decision: configs/grpo/tiny-cpu.yaml on the training suite's ledger states, K decisions per state scored
    without execution (closure rubric + format);
(b) environment: configs/grpo/tiny-cpu-env.yaml on the training tasks, K executed agent runs per task, reward =
    the judged answer (TRL's growing conversation; see rollout/environment.py).

Scored like bench_grpo_signal: in-loop dev accuracy (greedy planner, one run per dev task) and dev closure reward.
The figure defined whatever either arm does: per repeat, d = (decision accuracy gain per CPU-s) − (environment
accuracy gain per CPU-s); reported as the mean of d over repeats with a 95% t-interval. The ratio of the medians of
the accuracy gains per CPU-s is reported too, and is null (with the reason) when the environment arm's median gain
is not above 0: an arm that never gains has no finite ratio, while d stays defined.

    python -m bench.bench_grpo_env --budget-cpu-s 30 --seeds 0 1 2 --train-tasks 8 --dev-tasks 8 --dev-states 32
    python -m bench.bench_grpo_env --smoke     # runs, measures nothing (bench/common.py)
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.bench_grpo_signal import cpu_budget_callback, decision_arm, score
from bench.common import ROOT, Run, grpo_smoke_args, parse_args
from bench.pipeline import DIGEST_MAX_CHARS, sft_planner, synth_suite, teacher_harvest
from bench.schema import Arm, measure
from bench.trajectory_grpo import CpuTailAverage, cpu_seconds

logger = logging.getLogger(__name__)
ENV_RECIPE = ROOT / "configs" / "grpo" / "tiny-cpu-env.yaml"
# two-sided 95% Student t quantiles by degrees of freedom (repeats - 1)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """(mean, low, high): the 95% t-interval of the mean over repeats.

    >>> [round(x, 3) for x in t_interval([1.0, 2.0, 3.0])]
    [2.0, -0.484, 4.484]
    """
    mean = statistics.fmean(values)
    half = T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))
    return round(mean, 8), round(mean - half, 8), round(mean + half, 8)


def environment_arm(start: Path, tasks_dir: Path, out: Path, seed: int, budget: float,
                    batch: int, extra: list[str] | None = None) -> tuple[Path, dict]:
    from omnidecision.rl import train as rl_train
    from omnidecision.rl.config import parse_args

    callback = cpu_budget_callback(budget)
    args = parse_args(["--config", str(ENV_RECIPE), "--model_name_or_path", str(start), "--dataset_name",
                       str(tasks_dir), "--output_dir", str(out), "--seed", str(seed), "--max_steps", "100000",
                       "--logging_steps", "1", "--log_completions", "false", "--save_strategy", "no",
                       "--per_device_train_batch_size", str(batch), "--generation_batch_size", str(batch),
                       *(extra or [])])
    averager = CpuTailAverage(lambda: cpu_seconds() - callback.start if callback.start is not None else 0.0,
                              budget, 0.5)
    report = rl_train.main(*args, callbacks=[callback, averager.callback])
    history = json.loads((out / "log_history.json").read_text())
    steps = [h for h in history if "frac_reward_zero_std" in h]
    per_step = args[1].generation_batch_size
    return out, {"steps": report["steps"], "cpu_s": round(callback.used, 2), "wall_s": round(callback.wall, 2),
                 "runs": report["rollouts"], "runs_judged_correct": report["judged_correct_rate"],
                 "decisions_with_signal": sum(round((1 - h["frac_reward_zero_std"]) * per_step) for h in steps),
                 "averaged_snapshots": averager.applied,
                 "reward_mean_first_last": [steps[0].get("reward"), steps[-1].get("reward")] if steps else None}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train-tasks", type=int, default=12)
    p.add_argument("--dev-tasks", type=int, default=12)
    p.add_argument("--sft-steps", type=int, default=150)
    p.add_argument("--budget-cpu-s", type=float, default=30.0)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--dev-states", type=int, default=64)
    p.add_argument("--suite-seed", type=int, default=100)
    p.add_argument("--env-batch", type=int, default=8, help="environment arm: rollouts per optimizer step (a "
                   "multiple of K; 8 = one task's K=8 runs: a step of the recipe's 32 runs overruns a small budget)")
    p.add_argument("--name", default="grpo_env")
    p.add_argument("--step-budget", type=int, default=15, help="agent steps per dev run")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens per scored dev decision")
    a = parse_args(p, argv, smoke={"train_tasks": 2, "dev_tasks": 2, "sft_steps": 2, "budget_cpu_s": 0.5,
                                   "dev_states": 4, "step_budget": 2, "max_new_tokens": 8})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for noisy in ("httpx", "datasets", "transformers", "trl"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    run = Run(a.name, a.smoke)

    import datasets

    from omnidecision.agent.config import AgentConfig
    from omnidecision.backends.teacher import TeacherBackend
    from omnidecision.modeling import load_planner

    teacher = TeacherBackend(noise=0.0)
    agent_config = AgentConfig(mode="ledger", step_budget=a.step_budget, digest_max_chars=DIGEST_MAX_CHARS)
    with tempfile.TemporaryDirectory(prefix="bench-grpo-env-") as tmp:
        work = Path(tmp)
        # -- setup (in neither budget)
        t_setup = cpu_seconds()
        train_tasks = synth_suite(a.train_tasks, a.suite_seed, work / "tasks-train")
        dev_tasks = synth_suite(a.dev_tasks, a.suite_seed + 1000, work / "tasks-dev")
        train_data = teacher_harvest(train_tasks, work / "h-train", val_fraction=0.0)
        dev_data = teacher_harvest(dev_tasks, work / "h-dev", val_fraction=0.0)
        rl_dir = work / "rl"
        rl_dir.mkdir()
        shutil.copy(next((train_data / "rl").glob("train-*.parquet")), rl_dir / "train-00000.parquet")
        shutil.copy(next((dev_data / "rl").glob("train-*.parquet")), rl_dir / "validation-00000.parquet")
        dev_states = datasets.load_dataset(str(rl_dir), split="validation")
        dev_states = dev_states.shuffle(seed=0).select(range(min(a.dev_states, len(dev_states))))
        start = sft_planner(train_data, work / "start", steps=a.sft_steps)
        setup_cpu = cpu_seconds() - t_setup
        model, tokenizer = load_planner(start)
        base = score(model, tokenizer, dev_states, dev_tasks, teacher, agent_config, a.max_new_tokens)
        logger.info("START: dev closure %.4f, in-loop dev accuracy %.3f", base["closure"], base["accuracy"])

        repeats: list[dict[str, Any]] = []
        for i, seed in enumerate(a.seeds):
            order = ("decision", "environment") if i % 2 == 0 else ("environment", "decision")
            row: dict[str, Any] = {"seed": seed, "order": list(order)}
            for arm in order:
                out = work / f"{arm}-{seed}"
                if arm == "decision":
                    out, info = decision_arm(start, rl_dir, out, seed, a.budget_cpu_s, grpo_smoke_args(a.smoke))
                else:
                    out, info = environment_arm(start, work / "tasks-train", out, seed, a.budget_cpu_s,
                                                a.env_batch, grpo_smoke_args(a.smoke, environment=True))
                trained, tok = load_planner(out)
                s = score(trained, tok, dev_states, dev_tasks, teacher, agent_config, a.max_new_tokens)
                info.update(dev_closure=s["closure"], dev_accuracy=s["accuracy"], dev_outcomes=s["outcomes"],
                            closure_gain=round(s["closure"] - base["closure"], 4),
                            accuracy_gain=round(s["accuracy"] - base["accuracy"], 4))
                row[arm] = info
                logger.info("seed %d %s: %s", seed, arm, info)
                del trained
                shutil.rmtree(out, ignore_errors=True)
            repeats.append(row)

    labels = {"decision": "decision-level GRPO (TRL GRPOTrainer on ledger states; K decisions scored by the "
                          "closure rubric, nothing executed)",
              "environment": "TRL environment GRPO (GRPOTrainer(environment_factory=LedgerEnvironment); K executed "
                             "agent runs per task, reward = judged answer)"}
    arms = {}
    for arm in ("decision", "environment"):
        rows = [r[arm] for r in repeats]
        arms[arm] = Arm(label=labels[arm], figures={
            "accuracy_gain_per_cpu_s": measure([r["accuracy_gain"] / r["cpu_s"] for r in rows], "accuracy / CPU-s"),
            "closure_gain_per_cpu_s": measure([r["closure_gain"] / r["cpu_s"] for r in rows],
                                              "closure reward / CPU-s"),
            "accuracy_gain": measure([r["accuracy_gain"] for r in rows], "accuracy"),
            "closure_gain": measure([r["closure_gain"] for r in rows], "closure reward"),
            "cpu_s": measure([r["cpu_s"] for r in rows], "CPU-s"),
            "optimizer_steps": measure([r["steps"] for r in rows], "steps"),
        })
    diff = [r["decision"]["accuracy_gain"] / r["decision"]["cpu_s"]
            - r["environment"]["accuracy_gain"] / r["environment"]["cpu_s"] for r in repeats]
    diff_closure = [r["decision"]["closure_gain"] / r["decision"]["cpu_s"]
                    - r["environment"]["closure_gain"] / r["environment"]["cpu_s"] for r in repeats]
    mean, low, high = t_interval(diff)
    cmean, clow, chigh = t_interval(diff_closure)
    result = run.result(
        title="decision-level GRPO vs TRL's environment GRPO: held-out in-loop accuracy gain per CPU-second",
        arms=arms, candidate="decision", baseline="environment", metric="accuracy_gain_per_cpu_s",
        ratio_method="ratio_of_medians", repeats=len(a.seeds),
        better="higher: decision-level GRPO buys that many times more in-loop dev accuracy gain per CPU-second than "
               "TRL's environment GRPO",
        ratio_note="the environment arm's median accuracy gain was not above 0: no finite ratio; see "
                   "details.difference (defined whatever either arm does)",
        notes=[f"START planner: in-loop dev accuracy {round(base['accuracy'], 4)} ({len(dev_tasks)} tasks), dev "
               f"closure {base['closure']}; setup {round(setup_cpu)} CPU-s, in neither budget",
               "difference = decision minus environment gain per CPU-s, per repeat; mean with a 95% t-interval",
               "the budget is CPU time, checked after each optimizer step: the last step may run over, and each "
               "gain is divided by the CPU-seconds the arm actually used"],
        details={"difference": {"accuracy_gain_per_cpu_s": {"per_repeat": [round(d, 8) for d in diff],
                                                            "mean": mean, "ci95": [low, high]},
                                "closure_gain_per_cpu_s": {"per_repeat": [round(d, 8) for d in diff_closure],
                                                           "mean": cmean, "ci95": [clow, chigh]}},
                 "budget_cpu_s": a.budget_cpu_s, "env_batch": a.env_batch, "train_tasks": a.train_tasks,
                 "dev_tasks": a.dev_tasks,
                 "dev_states": len(dev_states), "sft_steps": a.sft_steps,
                 "recipes": ["configs/grpo/tiny-cpu.yaml (select_states all)", "configs/grpo/tiny-cpu-env.yaml"],
                 "start": {"dev_accuracy": base["accuracy"], "dev_closure": base["closure"],
                           "dev_outcomes": base["outcomes"]},
                 "setup_cpu_s": round(setup_cpu, 1), "repeats": repeats})
    path = run.write(result)
    print(f"accuracy gain per CPU-s, decision - environment: mean {mean} (95% CI {low} to {high}); "
          f"ratio of medians {result.ratio}")
    print(f"wrote {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
