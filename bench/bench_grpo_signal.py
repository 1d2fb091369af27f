"""Decision-level vs trajectory-level GRPO: held-out improvement per CPU-second, from the same SFT planner.

Setup (once, not counted in either budget): a training suite and a dev suite from `omnidecision tasks synth`
(distinct seeds), the noisy scripted teacher collected on both and harvested, a tiny planner trained by the shipped
SFT recipe on the training harvest: the START planner.

Then per repeat (a seed), both arms from START with the same GRPO recipe (configs/grpo/tiny-cpu.yaml: K
generations, temperature, completion length, optimizer, lr schedule, clipping; state selection and weight
the recipe's tail weight averaging in both, over the last half of the budget in CPU time; state selection off,
since the trajectory arm has no states to select), each for the same budget of CPU-seconds (process + children
CPU time, so other jobs on a shared machine do not eat into it), in alternating order:

(a) decision-level (this project): TRL's GRPOTrainer through `omnidecision.rl.train.main`; one prompt = one ledger
    state of the training suite (the teacher's harvested RL states); K decisions per state scored WITHOUT running
    them by the closure rubric (+ format shaping, the recipe's rewards);
(b) trajectory-level: per step 2 training tasks, K full agent runs each EXECUTED in the loop (tools run, the
    noise-free teacher plays the other roles), reward = the judged final answer; GRPO over the K runs of a task
    (bench/trajectory_grpo.py: same model, same optimizer and schedule built from the same recipe).

Each result is scored on the fixed dev suite, as is START: the held-out closure reward (greedy decision per dev
ledger state, paired per state with START) and the in-loop accuracy (greedy planner, one run per dev task).
Improvement per CPU-second = (result − START) / CPU-seconds the arm used. `ratio` = (a) / (b) on the closure
improvement per CPU-second (ratio of the medians over repeats: a single repeat's baseline improvement can be
≤ 0); the in-loop figures are reported alongside.

    python -m bench.bench_grpo_signal --budget-cpu-s 90 --seeds 0 1 2      # ≈ 15 min on 2 idle cores
    python -m bench.bench_grpo_signal --name grpo_signal_long --sft-steps 400 --budget-cpu-s 240 --train-tasks 48 \
        --dev-tasks 40 --dev-states 200                                    # ≈ 45 min: not in `make bench`
    python -m bench.bench_grpo_signal --smoke                              # runs, measures nothing (bench/common.py)
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import ROOT, Run, grpo_smoke_args, parse_args
from bench.pipeline import DIGEST_MAX_CHARS, sft_planner, synth_suite, teacher_harvest
from bench.schema import Arm, measure
from bench.trajectory_grpo import CpuTailAverage, cpu_seconds, in_loop_accuracy, train_trajectory_grpo

logger = logging.getLogger(__name__)
RECIPE = ROOT / "configs" / "grpo" / "tiny-cpu.yaml"
# the figures that can honestly be 0 or below (bench/common.py: unmeasured)
GAINS = ("closure_gain_per_cpu_s", "accuracy_gain_per_cpu_s", "closure_gain", "accuracy_gain", "dev_closure",
         "dev_accuracy", "decisions_with_signal_per_cpu_s")


def cpu_budget_callback(budget_cpu_s: float) -> Any:
    """A TrainerCallback that stops training once `budget_cpu_s` CPU-seconds have been spent since it began
    (checked after each optimizer step, as the trajectory arm checks before each), and records what was used."""
    from transformers import TrainerCallback

    class CpuBudget(TrainerCallback):
        def __init__(self) -> None:
            self.start: float | None = None
            self.used = 0.0
            self.wall = 0.0
            self._t0 = 0.0

        def on_train_begin(self, args, state, control, **kwargs):
            self.start, self._t0 = cpu_seconds(), time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if self.start is not None and cpu_seconds() - self.start >= budget_cpu_s:
                control.should_training_stop = True
            return control

        def on_train_end(self, args, state, control, **kwargs):
            if self.start is not None:
                self.used, self.wall = cpu_seconds() - self.start, time.perf_counter() - self._t0

    return CpuBudget()


def recipe_args(overrides: list[str]) -> tuple[Any, Any, Any]:
    from omnidecision.rl.config import parse_args

    # weight averaging is done by CpuTailAverage (over the tail of the CPU budget, in both arms), so off here
    return parse_args(["--config", str(RECIPE), "--select_states", "all", "--weight_average", "false",
                       "--eval_closure_n", "0", "--log_completions", "false", "--save_strategy", "no",
                       "--max_steps", "100000", "--logging_steps", "1", *overrides])


def decision_arm(start: Path, rl_dir: Path, out: Path, seed: int, budget: float,
                 extra: Sequence[str] = ()) -> tuple[Path, dict[str, Any]]:
    """The recipe's GRPO on the ledger states of `rl_dir` from `start` for `budget` CPU-seconds; `extra`: recipe
    options appended (the smoke size's, bench.common.grpo_smoke_args; bench_grpo_env's checkpoint policy and its
    executed-return arm's reward)."""
    from omnidecision.rl import train as rl_train

    callback = cpu_budget_callback(budget)
    args = recipe_args(["--model_name_or_path", str(start), "--dataset_name", str(rl_dir), "--output_dir", str(out),
                        "--seed", str(seed), *extra])
    averager = CpuTailAverage(lambda: cpu_seconds() - callback.start if callback.start is not None else 0.0,
                              budget, args[0].weight_average_start)
    report = rl_train.main(*args, callbacks=[callback, averager.callback])
    history = json.loads((out / "log_history.json").read_text())
    per_step = args[1].generation_batch_size  # completions per optimizer step (one generation per step)
    steps = [h for h in history if "frac_reward_zero_std" in h]
    with_signal = sum(round((1 - h["frac_reward_zero_std"]) * per_step) for h in steps)
    return out, {"steps": report["steps"], "cpu_s": round(callback.used, 2), "wall_s": round(callback.wall, 2),
                 "decisions": per_step * report["steps"], "decisions_with_signal": with_signal,
                 "averaged_snapshots": averager.applied,
                 "reward_mean_first_last": [steps[0].get("reward"), steps[-1].get("reward")] if steps else None}


def trajectory_arm(start: Path, train_tasks: list[Any], seed: int, budget: float, tasks_per_step: int,
                   teacher: Any, agent_config: Any, extra: Sequence[str] = ()) -> tuple[Any, dict[str, Any]]:
    from omnidecision.modeling import load_planner

    script_args, training_args, _ = recipe_args(["--model_name_or_path", str(start), "--dataset_name", str(start),
                                                 "--output_dir", str(start / "unused"), "--seed", str(seed),
                                                 *extra])
    model, tokenizer = load_planner(start, trainable=True)
    report = train_trajectory_grpo(model, tokenizer, train_tasks, training_args, budget_cpu_s=budget,
                                   tasks_per_step=tasks_per_step, teacher=teacher, agent_config=agent_config,
                                   seed=seed, average_start=script_args.weight_average_start)
    first, last = (report["log"][0], report["log"][-1]) if report["log"] else ({}, {})
    return (model, tokenizer), {
        "steps": report["steps"], "cpu_s": report["cpu_s"], "wall_s": report["wall_s"],
        "decisions": report["decisions"], "decisions_with_signal": report["decisions_with_signal"],
        "averaged_snapshots": report["averaged_snapshots"],
        "runs": report["steps"] * tasks_per_step * training_args.num_generations,
        "reward_mean_first_last": [first.get("reward_mean"), last.get("reward_mean")],
        "frac_groups_zero_std": round(statistics.fmean(e["frac_groups_zero_std"] for e in report["log"]), 4)
        if report["log"] else None}


def score(model: Any, tokenizer: Any, dev_states: Any, dev_tasks: list[Any], teacher: Any,
          agent_config: Any, max_new_tokens: int = 32) -> dict[str, Any]:
    """Dev closure reward (greedy, per state) and in-loop dev accuracy (greedy, per task), each decision at most
    `max_new_tokens` tokens (the recipe's completion length)."""
    from omnidecision.rl.evaluate import heldout_closure_reward

    closure = heldout_closure_reward(model, dev_states, n=-1, tokenizer=tokenizer, mode="greedy",
                                     max_new_tokens=max_new_tokens, batch_size=32)
    correct, outcomes = in_loop_accuracy(model, tokenizer, dev_tasks, teacher=teacher, agent_config=agent_config,
                                         max_new_tokens=max_new_tokens)
    return {"closure": closure["closure"]["mean"], "per_state": closure["per_state"],
            "components": closure["components"], "valid_rate": closure["valid_rate"],
            "accuracy": sum(correct) / len(correct), "correct": correct, "outcomes": outcomes}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train-tasks", type=int, default=32)
    p.add_argument("--dev-tasks", type=int, default=24)
    p.add_argument("--sft-steps", type=int, default=150, help="SFT steps of the START planner")
    p.add_argument("--budget-cpu-s", type=float, default=90.0, help="CPU-seconds of training per arm and repeat")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one repeat per seed (>= 3)")
    p.add_argument("--tasks-per-step", type=int, default=2, help="trajectory arm: tasks per optimizer step")
    p.add_argument("--dev-states", type=int, default=128, help="dev ledger states for the closure reward")
    p.add_argument("--suite-seed", type=int, default=100, help="training suite seed (dev: +1000)")
    p.add_argument("--step-budget", type=int, default=15, help="agent steps per run (training and dev runs)")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens per scored dev decision")
    p.add_argument("--name", default="grpo_signal", help="result name: bench/results/NAME.json (a longer variant "
                                                             "keeps its own file, e.g. grpo_signal_long)")
    p.add_argument("--out", type=Path, default=None, help="default: bench/results/NAME.json")
    a = parse_args(p, argv, smoke={"train_tasks": 2, "dev_tasks": 2, "sft_steps": 2, "budget_cpu_s": 0.5,
                                   "tasks_per_step": 1, "dev_states": 4, "step_budget": 2, "max_new_tokens": 8})
    extra = grpo_smoke_args(a.smoke)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for noisy in ("httpx", "datasets", "transformers", "trl"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    run = Run(a.name, a.smoke)

    import datasets

    from omnidecision.agent.config import AgentConfig
    from omnidecision.backends.teacher import TeacherBackend
    from omnidecision.modeling import load_planner
    from omnidecision.rl.evaluate import paired_comparison

    teacher = TeacherBackend(noise=0.0)  # the other roles, as in the demo's evaluations
    agent_config = AgentConfig(mode="ledger", step_budget=a.step_budget, digest_max_chars=DIGEST_MAX_CHARS)
    with tempfile.TemporaryDirectory(prefix="bench-grpo-signal-") as tmp:
        work = Path(tmp)
        # -- setup: suites, teacher harvests, the START planner (shared by both arms; not in either budget)
        t_setup = cpu_seconds()
        train_tasks = synth_suite(a.train_tasks, a.suite_seed, work / "tasks-train")
        dev_tasks = synth_suite(a.dev_tasks, a.suite_seed + 1000, work / "tasks-dev")
        train_data = teacher_harvest(train_tasks, work / "h-train", val_fraction=0.0)
        dev_data = teacher_harvest(dev_tasks, work / "h-dev", val_fraction=0.0)
        rl_dir = work / "rl"  # train = training-suite states; validation = dev states (GRPO's own eval is off)
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

        # -- the arms, per repeat, alternating which goes first
        repeats: list[dict[str, Any]] = []
        for i, seed in enumerate(a.seeds):
            order = ("decision", "trajectory") if i % 2 == 0 else ("trajectory", "decision")
            row: dict[str, Any] = {"seed": seed, "order": list(order)}
            for arm in order:
                if arm == "decision":
                    out, info = decision_arm(start, rl_dir, work / f"decision-{seed}", seed, a.budget_cpu_s, extra)
                    trained, tok = load_planner(out)
                else:
                    (trained, tok), info = trajectory_arm(start, train_tasks, seed, a.budget_cpu_s,
                                                          a.tasks_per_step, teacher, agent_config, extra)
                s = score(trained, tok, dev_states, dev_tasks, teacher, agent_config, a.max_new_tokens)
                paired = paired_comparison(base["per_state"], s["per_state"], seed=seed)
                info.update(dev_closure=s["closure"], dev_accuracy=s["accuracy"], valid_rate=s["valid_rate"],
                            dev_outcomes=s["outcomes"], dev_closure_components=s["components"],
                            closure_gain=round(s["closure"] - base["closure"], 4),
                            accuracy_gain=round(s["accuracy"] - base["accuracy"], 4), closure_paired=paired,
                            tasks_flipped={"to_correct": sum(not b and n for b, n in zip(base["correct"],
                                                                                        s["correct"], strict=True)),
                                           "to_wrong": sum(b and not n for b, n in zip(base["correct"],
                                                                                      s["correct"], strict=True))})
                row[arm] = info
                logger.info("seed %d %s: %s", seed, arm, {k: v for k, v in info.items() if k != "closure_paired"})
                del trained
            repeats.append(row)
            shutil.rmtree(work / f"decision-{seed}", ignore_errors=True)

    arms = {}
    labels = {"decision": "decision-level GRPO (TRL GRPOTrainer; K decisions per ledger state, closure rubric, "
                          "nothing executed)",
              "trajectory": "trajectory-level GRPO (K executed agent runs per task, reward = judged final answer)"}
    for arm in ("decision", "trajectory"):
        rows = [r[arm] for r in repeats]
        arms[arm] = Arm(label=labels[arm], figures={
            "closure_gain_per_cpu_s": measure([r["closure_gain"] / r["cpu_s"] for r in rows],
                                              "closure reward / CPU-s"),
            "accuracy_gain_per_cpu_s": measure([r["accuracy_gain"] / r["cpu_s"] for r in rows], "accuracy / CPU-s"),
            "closure_gain": measure([r["closure_gain"] for r in rows], "closure reward"),
            "accuracy_gain": measure([r["accuracy_gain"] for r in rows], "accuracy"),
            "dev_closure": measure([r["dev_closure"] for r in rows], "closure reward"),
            "dev_accuracy": measure([r["dev_accuracy"] for r in rows], "accuracy"),
            "cpu_s": measure([r["cpu_s"] for r in rows], "CPU-s"),
            "wall_s": measure([r["wall_s"] for r in rows], "s"),
            "optimizer_steps": measure([r["steps"] for r in rows], "steps"),
            "decisions_with_signal_per_cpu_s": measure([r["decisions_with_signal"] / r["cpu_s"] for r in rows],
                                                       "decisions / CPU-s"),
        })
    acc_a = arms["decision"].figures["accuracy_gain_per_cpu_s"].median
    acc_b = arms["trajectory"].figures["accuracy_gain_per_cpu_s"].median
    result = run.result(
        title="decision-level vs trajectory-level GRPO: held-out improvement per CPU-second from the same SFT start",
        arms=arms, candidate="decision", baseline="trajectory", metric="closure_gain_per_cpu_s",
        ratio_method="ratio_of_medians", repeats=len(a.seeds),
        better="higher: decision-level GRPO buys that many times more held-out closure-reward gain per CPU-second "
               "than trajectory-level GRPO (below 1: less)",
        ratio_note="the trajectory arm's median closure gain was not above 0: no ratio of improvements exists",
        # the decisions with signal can be 0 too (every completion of a group scored alike); the CPU and wall
        # seconds and the optimizer steps cannot
        may_be_zero=GAINS,
        notes=[f"START planner: dev closure {base['closure']}, in-loop dev accuracy {round(base['accuracy'], 4)} "
               f"({len(dev_tasks)} tasks); setup {round(setup_cpu)} CPU-s, in neither budget",
               "in-loop accuracy moves in steps of 1/dev-tasks; see details.accuracy_ratio_of_medians",
               "the budget is CPU time (process + children), checked between optimizer steps: the last step may "
               "run over, and each arm's gain is divided by the CPU-seconds it actually used"],
        details={"budget_cpu_s": a.budget_cpu_s, "train_tasks": a.train_tasks, "dev_tasks": a.dev_tasks,
                 "step_budget": a.step_budget, "max_new_tokens": a.max_new_tokens,
                 "dev_states": len(dev_states), "sft_steps": a.sft_steps, "tasks_per_step": a.tasks_per_step,
                 "recipe": "configs/grpo/tiny-cpu.yaml; select_states all; weight averaging over the last "
                           "(1 - weight_average_start) of the CPU budget in both arms",
                 "start": {"dev_closure": base["closure"], "dev_accuracy": base["accuracy"],
                           "valid_rate": base["valid_rate"], "dev_outcomes": base["outcomes"],
                           "dev_closure_components": base["components"]},
                 "setup_cpu_s": round(setup_cpu, 1),
                 "accuracy_ratio_of_medians": round(acc_a / acc_b, 4) if acc_b > 0 else None,
                 "repeats": repeats})
    path = run.write(result, a.out)
    f = {k: arms[k].figures for k in arms}
    for k in arms:
        print(f"{k:>10}: closure gain {f[k]['closure_gain'].values} over {f[k]['cpu_s'].values} CPU-s; accuracy "
              f"gain {f[k]['accuracy_gain'].values}; steps {f[k]['optimizer_steps'].values}")
    print(f"ratio (closure gain per CPU-s, decision / trajectory, ratio of medians): {result.ratio} "
          f"(per repeat {result.ratio_repeats}); in-loop accuracy: {result.details['accuracy_ratio_of_medians']}")
    print(f"wrote {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
