"""P7 against TRL's own multi-turn GRPO: decision-level GRPO (proxy reward, executed returns) vs
`GRPOTrainer(environment_factory=LedgerEnvironment)`, from an SFT start that solves at least 30% of the dev tasks.

The successor of `bench_grpo_signal`'s comparison: the baseline is no longer the project's home-made trajectory
GRPO (bench/trajectory_grpo.py, kept as a cross-check of the gradient there) but what a TRL user would run, the
ledger agent as a TRL environment (omnidecision/rollout/environment.py, `configs/grpo/tiny-cpu-env.yaml`), through
`omnidecision.grounding.grpo.main` (GRPO with the agent in the loop, on the decision GRPO's phases).

Setup (once, in neither budget): training and dev suites (`omnidecision tasks synth`, distinct seeds), the
collection teacher (default: the demo's teacher with habits, configs/collect/synthetic-habits.yaml) collected through
its collect recipe and harvested on both, the START planner SFT-trained on the training harvest (bench/pipeline.py;
4 heads, as the demo's). START's in-loop dev accuracy is checked in code: below `--min-start-accuracy` (0.30) the
figure is undefined and the result says so and why (the arms still run and are recorded). Per repeat (a seed), the
three arms from START for the same CPU-second budget, the order rotated (each arm first, second and third in turn),
with the same generation settings (K, temperature, top_p/top_k) and optimizer recipe, tail weight averaging over the
last half of the budget in all:

(a) proxy: configs/grpo/tiny-cpu.yaml on the training suite's ledger states, K decisions per state scored without
    execution (closure rubric + format);
(b) executed: the same states, K, settings and budget, the reward of configs/grpo/tiny-cpu-exec.yaml instead
    (omnidecision/grounding/reward.py: each decision applied at its recorded state, the run continued by the
    collection's teacher and judged, n=1; + format). The executions run inside the reward call of each GRPO step,
    in this process (tools' subprocesses are reaped children), so `cpu_seconds()` and the budget hold them; their
    share is recorded (`executed_reward_cpu_share`, timed by `timed_executed_reward`);
(c) environment: configs/grpo/tiny-cpu-env.yaml on the training tasks, K executed agent runs per task, reward =
    the judged answer (TRL's growing conversation; see rollout/environment.py).

Scored like bench_grpo_signal: in-loop dev accuracy (greedy planner, one run per dev task) and dev closure reward.
The figure (details.figure): per repeat, each arm's accuracy gain per CPU-s; the differences executed − proxy,
proxy − environment and executed − environment per repeat, each as the mean over repeats with a 95% t-interval;
ratios of the medians, null (with the reason) where the denominator's median gain is not above 0 (an arm that never
gains has no finite ratio, while the differences stay defined). The headline ratio is proxy / environment.

    nice -n 10 python -m bench.bench_grpo_env --train-tasks 48 --sft-steps 1200 --dev-tasks 20 --dev-states 64 \
        --budget-cpu-s 90 --seeds 0 1 2        # ≈ 60 min wall on 2 shared cores
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.bench_grpo_signal import cpu_budget_callback, decision_arm, score
from bench.common import ROOT, Run, grpo_smoke_args, parse_args
from bench.pipeline import DIGEST_MAX_CHARS, sft_planner, synth_suite, teacher_harvest
from bench.schema import Arm, measure
from bench.trajectory_grpo import CpuTailAverage, cpu_seconds

logger = logging.getLogger(__name__)
ENV_RECIPE = ROOT / "configs" / "grpo" / "tiny-cpu-env.yaml"
# the executed reward (configs/grpo/tiny-cpu-exec.yaml's), reached through a wrapper that times its calls
EXECUTED_REWARD = "bench.bench_grpo_env.timed_executed_reward"
EXECUTED_CPU_FILE = "executed_reward_cpu.json"
ARMS = ("proxy", "executed", "environment")
# the differences of accuracy gain per CPU-s the figure reports (first minus second), per repeat
PAIRS = (("executed", "proxy"), ("proxy", "environment"), ("executed", "environment"))
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


def timed_executed_reward(**kwargs: Any) -> Any:
    """`omnidecision.grounding.reward.get_executed_reward(**kwargs)`, its calls timed in this process's CPU-seconds
    (`cpu_seconds`: own threads and reaped children, so whatever the executor runs is in it) and the total written
    to `output_dir`/executed_reward_cpu.json after every call: the executed arm's share of its own budget. A file,
    not a global: GRPO imports this module by its path, a second copy when the bench runs as `__main__`."""
    from omnidecision.grounding.reward import get_executed_reward

    inner = get_executed_reward(**kwargs)
    out = Path(kwargs["output_dir"]) / EXECUTED_CPU_FILE if kwargs.get("output_dir") else None
    spent = {"cpu_s": 0.0, "calls": 0}

    def executed_reward(completions: Sequence[object], **columns: Any) -> list[float | None]:
        t0 = cpu_seconds()
        values = inner(completions, **columns)
        spent["cpu_s"] += cpu_seconds() - t0
        spent["calls"] += 1
        if out is not None:
            out.write_text(json.dumps({"cpu_s": round(spent["cpu_s"], 3), "calls": spent["calls"]}), "utf-8")
        return values

    return executed_reward


def executed_arm(start: Path, rl_dir: Path, runs: Path, out: Path, seed: int, budget: float,
                 extra: list[str]) -> tuple[Path, dict]:
    """(a)'s recipe, states, K, generation settings and budget with (a)'s closure rubric replaced by the executed
    return (configs/grpo/tiny-cpu-exec.yaml's reward and weights: executed 1.0, format 0.25): each candidate applied
    at its recorded state and the run continued by the collection's teacher, n=1, judged. The executions run inside
    the GRPO step (the reward call), so their CPU time is in the arm's budget."""
    kwargs = {"runs": [str(runs)], "policy": "teacher", "n": 1, "output_dir": str(out)}
    out, info = decision_arm(start, rl_dir, out, seed, budget, extra=[
        *extra, "--reward_funcs", EXECUTED_REWARD, "format", "--reward_weights", "1.0", "0.25",
        "--reward_kwargs", json.dumps({EXECUTED_REWARD: kwargs})])
    cost = json.loads((out / "executed_cost.json").read_text()) if (out / "executed_cost.json").is_file() else {}
    timed = json.loads((out / EXECUTED_CPU_FILE).read_text()) if (out / EXECUTED_CPU_FILE).is_file() else {}
    info.update(executions=cost.get("executions", 0), executions_cached=cost.get("cached", 0),
                executed_tool_calls=cost.get("tool_calls", 0), executed_reward_cpu_s=timed.get("cpu_s", 0.0),
                executed_reward_cpu_share=round(timed.get("cpu_s", 0.0) / info["cpu_s"], 4) if info["cpu_s"] else None)
    return out, info


def environment_arm(start: Path, tasks_dir: Path, out: Path, seed: int, budget: float,
                    batch: int, extra: list[str] | None = None) -> tuple[Path, dict]:
    from omnidecision.grounding import grpo as agent_grpo  # GRPO with the agent in the loop trains the environment

    callback = cpu_budget_callback(budget)
    args = agent_grpo.parse_args(["--config", str(ENV_RECIPE), "--model_name_or_path", str(start), "--dataset_name",
                       str(tasks_dir), "--output_dir", str(out), "--seed", str(seed), "--max_steps", "100000",
                       "--logging_steps", "1", "--log_completions", "false", "--save_strategy", "no",
                       "--per_device_train_batch_size", str(batch), "--generation_batch_size", str(batch),
                       *(extra or [])])
    averager = CpuTailAverage(lambda: cpu_seconds() - callback.start if callback.start is not None else 0.0,
                              budget, 0.5)
    report = agent_grpo.main(*args, callbacks=[callback, averager.callback])
    history = json.loads((out / "log_history.json").read_text())
    steps = [h for h in history if "frac_reward_zero_std" in h]
    per_step = args[1].generation_batch_size
    return out, {"steps": report["steps"], "cpu_s": round(callback.used, 2), "wall_s": round(callback.wall, 2),
                 "runs": report["rollouts"], "runs_judged_correct": report["judged_correct_rate"],
                 "decisions_with_signal": sum(round((1 - h["frac_reward_zero_std"]) * per_step) for h in steps),
                 "averaged_snapshots": averager.applied,
                 "reward_mean_first_last": [steps[0].get("reward"), steps[-1].get("reward")] if steps else None}


def per_cpu_s(row: dict[str, Any], key: str = "accuracy_gain") -> float:
    return row[key] / row["cpu_s"]


def ratio_of_medians(repeats: list[dict[str, Any]], num: str, den: str) -> dict[str, Any]:
    """median accuracy gain per CPU-s of `num` over `den`'s, or null with the reason (a denominator whose median
    gain is not above 0 has no finite ratio)."""
    a = statistics.median(per_cpu_s(r[num]) for r in repeats)
    b = statistics.median(per_cpu_s(r[den]) for r in repeats)
    if b > 0:
        return {"value": round(a / b, 6), "reason": None}
    return {"value": None, "reason": f"{den}'s median accuracy gain per CPU-s is {round(b, 8)}, not above 0: no "
                                     "finite ratio (the difference stays defined)"}


def figure(repeats: list[dict[str, Any]], start_accuracy: float, threshold: float, dev_tasks: int) -> dict[str, Any]:
    """The P7 figure: per repeat each arm's in-loop dev accuracy gain per CPU-s, the differences of `PAIRS` with
    95% t-intervals over repeats, and ratios of medians; undefined (null, with the reason) when the START planner
    solved fewer than `threshold` of the dev tasks: a start that solves nothing leaves no headroom a gain is
    measured in (and RL from it has no success to reinforce)."""
    gains = {arm: [round(per_cpu_s(r[arm]), 8) for r in repeats] for arm in ARMS}
    differences = {}
    for x, y in PAIRS:
        d = [per_cpu_s(r[x]) - per_cpu_s(r[y]) for r in repeats]
        mean, low, high = t_interval(d) if len(d) > 1 else (round(d[0], 8), None, None)
        differences[f"{x} - {y}"] = {"per_repeat": [round(v, 8) for v in d], "mean": mean, "ci95": [low, high]}
    ratios = {f"{x} / {y}": ratio_of_medians(repeats, x, y) for x, y in PAIRS}
    defined = start_accuracy >= threshold
    return {"defined": defined,
            "reason": None if defined else (
                f"the START planner solved {round(start_accuracy, 4)} of the {dev_tasks} dev tasks, below the "
                f"{threshold} the figure requires: the figure is undefined; the arms' measurements stay in "
                "details.repeats"),
            "start_dev_accuracy": round(start_accuracy, 4), "threshold": threshold, "dev_tasks": dev_tasks,
            "accuracy_gain_per_cpu_s": gains if defined else None,
            "differences": differences if defined else None,
            "ratios_of_medians": ratios if defined else None}


SETUP_KEYS = ("train_tasks", "dev_tasks", "sft_steps", "heads", "teacher", "suite_seed")


def build_setup(setup: Path, a: argparse.Namespace, collection_teacher: dict[str, Any] | None) -> float | None:
    """Suites, the teacher's collections and harvests, the RL states (train = training suite, validation = dev
    suite) and the START planner under `setup`; returns the CPU-seconds a reused setup cost when it was built (None:
    built now). setup.json records the options that shape it: a folder built with other options is refused."""
    record = setup / "setup.json"
    shape = {k: getattr(a, k) for k in SETUP_KEYS}
    if record.is_file():
        saved = json.loads(record.read_text("utf-8"))
        if saved.get("shape") != shape:
            raise SystemExit(f"{setup}: its setup was built with {saved.get('shape')}, not {shape}: give another "
                             "--setup-dir (or remove it)")
        logger.info("setup reused from %s (built in %.0f CPU-s)", setup, saved["cpu_s"])
        return float(saved["cpu_s"])
    if (setup / "tasks-train").exists():
        raise SystemExit(f"{setup}: a setup without setup.json (an interrupted build?): remove it or give another "
                         "--setup-dir")
    t0 = cpu_seconds()
    train_tasks = synth_suite(a.train_tasks, a.suite_seed, setup / "tasks-train")
    dev_tasks = synth_suite(a.dev_tasks, a.suite_seed + 1000, setup / "tasks-dev")
    # through the collect recipe: its manifest.json lets the executed arm resume the training runs' states
    train_data = teacher_harvest(train_tasks, setup / "h-train", val_fraction=0.0, teacher=collection_teacher,
                                 tasks_path=setup / "tasks-train")
    dev_data = teacher_harvest(dev_tasks, setup / "h-dev", val_fraction=0.0, teacher=collection_teacher,
                               tasks_path=setup / "tasks-dev")
    rl_dir = setup / "rl"
    rl_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(next((train_data / "rl").glob("train-*.parquet")), rl_dir / "train-00000.parquet")
    shutil.copy(next((dev_data / "rl").glob("train-*.parquet")), rl_dir / "validation-00000.parquet")
    sft_planner(train_data, setup / "start", steps=a.sft_steps, heads=a.heads)
    cpu = cpu_seconds() - t0
    record.write_text(json.dumps({"shape": shape, "cpu_s": round(cpu, 1)}), "utf-8")
    return None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train-tasks", type=int, default=24)
    p.add_argument("--dev-tasks", type=int, default=20, help="in-loop dev tasks (>= 16 for the 0.30 check to mean "
                   "something: accuracy moves in steps of 1/dev-tasks)")
    p.add_argument("--sft-steps", type=int, default=600)
    p.add_argument("--heads", type=int, default=4, help="attention heads of the tiny START planner (the demo's 4)")
    p.add_argument("--teacher", choices=("habits", "noisy"), default="habits",
                   help="collection teacher: habits = the demo's (configs/collect/synthetic-habits.yaml), noisy = "
                        "i.i.d. noise 0.25")
    p.add_argument("--min-start-accuracy", type=float, default=0.30, help="the figure is defined only from a START "
                   "that solves at least this share of the dev tasks")
    p.add_argument("--budget-cpu-s", type=float, default=60.0)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--dev-states", type=int, default=64)
    p.add_argument("--suite-seed", type=int, default=100)
    p.add_argument("--env-batch", type=int, default=8, help="environment arm: rollouts per optimizer step (a "
                   "multiple of K; 8 = one task's K=8 runs: a step of the recipe's 32 runs overruns a small budget)")
    p.add_argument("--checkpoint-policy", choices=("final", "dev_closure"), default="final",
                   help="the decision arms' checkpoint policy. final (default): the weights at the end of the budget "
                        "(tail-averaged), as the environment arm, which has no ledger states to select by; "
                        "dev_closure (the recipes'): the best of every 10 steps by the proxy's closure reward on the "
                        "dev states the score reads too, its evaluations in the budget: an executed arm whose "
                        "checkpoints never beat START on the proxy returns START")
    p.add_argument("--setup-dir", type=Path, default=None, help="build the setup (suites, harvests, START) here once "
                   "and reuse it while the options that shape it are the same (setup.json); default: a temporary "
                   "folder. A relative path keeps the result file free of machine paths")
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
    from omnidecision.backends.teacher import HABIT_TEACHER, TeacherBackend
    from omnidecision.modeling import load_planner

    teacher = TeacherBackend(noise=0.0)
    collection_teacher = HABIT_TEACHER if a.teacher == "habits" else None  # None: teacher_harvest's noise 0.25
    agent_config = AgentConfig(mode="ledger", step_budget=a.step_budget, digest_max_chars=DIGEST_MAX_CHARS)
    with tempfile.TemporaryDirectory(prefix="bench-grpo-env-") as tmp:
        work = Path(tmp)
        # -- setup (in neither budget): built in `work`, or built once in --setup-dir and reused from there
        setup = a.setup_dir or work
        t_setup = cpu_seconds()
        setup_cpu = build_setup(setup, a, collection_teacher)
        from omnidecision.tasks.loaders import load_tasks

        dev_tasks = load_tasks(setup / "tasks-dev", "synthetic")
        rl_dir, start = setup / "rl", setup / "start" / "sft"
        train_states = len(datasets.load_dataset(str(rl_dir), split="train"))
        dev_states = datasets.load_dataset(str(rl_dir), split="validation")
        dev_states = dev_states.shuffle(seed=0).select(range(min(a.dev_states, len(dev_states))))
        setup_cpu = setup_cpu if setup_cpu is not None else cpu_seconds() - t_setup
        model, tokenizer = load_planner(start)
        base = score(model, tokenizer, dev_states, dev_tasks, teacher, agent_config, a.max_new_tokens)
        logger.info("START: dev closure %.4f, in-loop dev accuracy %.3f", base["closure"], base["accuracy"])
        if base["accuracy"] < a.min_start_accuracy:
            logger.warning("START solved %.3f of the dev tasks (< %.2f): the figure will be undefined",
                           base["accuracy"], a.min_start_accuracy)

        checkpointing = ["--checkpoint_policy", a.checkpoint_policy, *grpo_smoke_args(a.smoke)]
        repeats: list[dict[str, Any]] = []
        for i, seed in enumerate(a.seeds):
            order = ARMS[i % len(ARMS):] + ARMS[:i % len(ARMS)]  # each arm goes first, second and third in turn
            row: dict[str, Any] = {"seed": seed, "order": list(order)}
            for arm in order:
                out = work / f"{arm}-{seed}"
                if arm == "proxy":
                    out, info = decision_arm(start, rl_dir, out, seed, a.budget_cpu_s, extra=checkpointing)
                elif arm == "executed":
                    out, info = executed_arm(start, rl_dir, setup / "h-train" / "runs", out, seed, a.budget_cpu_s,
                                             checkpointing)
                else:
                    out, info = environment_arm(start, setup / "tasks-train", out, seed, a.budget_cpu_s,
                                                a.env_batch, grpo_smoke_args(a.smoke, environment=True))
                trained, tok = load_planner(out)
                s = score(trained, tok, dev_states, dev_tasks, teacher, agent_config, a.max_new_tokens)
                info.update(dev_closure=s["closure"], dev_accuracy=s["accuracy"], dev_outcomes=s["outcomes"],
                            closure_gain=round(s["closure"] - base["closure"], 4),
                            accuracy_gain=round(s["accuracy"] - base["accuracy"], 4),
                            tasks_flipped={"to_correct": sum(not b and n for b, n in zip(base["correct"],
                                                                                        s["correct"], strict=True)),
                                           "to_wrong": sum(b and not n for b, n in zip(base["correct"],
                                                                                      s["correct"], strict=True))})
                row[arm] = info
                logger.info("seed %d %s: %s", seed, arm, info)
                del trained
                shutil.rmtree(out, ignore_errors=True)
            repeats.append(row)

    labels = {"proxy": "decision-level GRPO, proxy reward (TRL GRPOTrainer on ledger states; K decisions scored by "
                       "the closure rubric + format, nothing executed: configs/grpo/tiny-cpu.yaml)",
              "executed": "decision-level GRPO, executed returns (the same states, K and settings; each decision "
                          "applied at its state and the run continued by the collection's teacher, judged: the "
                          "reward of configs/grpo/tiny-cpu-exec.yaml, its CPU in the budget)",
              "environment": "TRL environment GRPO (GRPOTrainer(environment_factory=LedgerEnvironment); K executed "
                             "agent runs per task, reward = judged answer)"}
    arms = {}
    for arm in ARMS:
        rows = [r[arm] for r in repeats]
        arms[arm] = Arm(label=labels[arm], figures={
            "accuracy_gain_per_cpu_s": measure([per_cpu_s(r) for r in rows], "accuracy / CPU-s"),
            "closure_gain_per_cpu_s": measure([per_cpu_s(r, "closure_gain") for r in rows],
                                              "closure reward / CPU-s"),
            "accuracy_gain": measure([r["accuracy_gain"] for r in rows], "accuracy"),
            "closure_gain": measure([r["closure_gain"] for r in rows], "closure reward"),
            "dev_accuracy": measure([r["dev_accuracy"] for r in rows], "accuracy"),
            "cpu_s": measure([r["cpu_s"] for r in rows], "CPU-s"),
            "optimizer_steps": measure([r["steps"] for r in rows], "steps"),
        })
    fig = figure(repeats, base["accuracy"], a.min_start_accuracy, len(dev_tasks))
    # the raw differences, defined whatever the start (the figure reads them only from a qualifying start)
    difference = {}
    for key in ("accuracy_gain", "closure_gain"):
        for x, y in PAIRS:
            d = [per_cpu_s(r[x], key) - per_cpu_s(r[y], key) for r in repeats]
            mean, low, high = t_interval(d)
            difference.setdefault(f"{key}_per_cpu_s", {})[f"{x} - {y}"] = {
                "per_repeat": [round(v, 8) for v in d], "mean": mean, "ci95": [low, high]}
    start_note = (f"START planner: in-loop dev accuracy {round(base['accuracy'], 4)} ({len(dev_tasks)} tasks; the "
                  f"figure needs >= {a.min_start_accuracy}), dev closure {base['closure']}; setup "
                  f"{round(setup_cpu)} CPU-s, in neither budget")
    result = run.result(
        title="decision-level GRPO (proxy reward, executed returns) vs TRL's environment GRPO: held-out in-loop "
              "accuracy gain per CPU-second",
        arms=arms, candidate="proxy", baseline="environment", metric="accuracy_gain_per_cpu_s",
        ratio_method="ratio_of_medians", repeats=len(a.seeds),
        better="higher: decision-level GRPO with the proxy reward buys that many times more in-loop dev accuracy "
               "gain per CPU-second than TRL's environment GRPO",
        ratio_note="the environment arm's median accuracy gain was not above 0: no finite ratio; see "
                   "details.figure.differences (defined whatever either arm does)",
        # gains and dev accuracy can honestly be 0 or below; the CPU seconds and the optimizer steps cannot
        may_be_zero=("accuracy_gain_per_cpu_s", "closure_gain_per_cpu_s", "accuracy_gain", "closure_gain",
                     "dev_accuracy"),
        notes=[*([] if fig["defined"] else [f"FIGURE UNDEFINED: {fig['reason']}"]), start_note,
               "figure: per repeat each arm's accuracy gain per CPU-s; differences executed - proxy, proxy - "
               "environment, executed - environment per repeat, mean with a 95% t-interval over repeats "
               "(details.figure)",
               "the budget is CPU time of the process and its reaped children, checked after each optimizer step: "
               "the last step may run over, and each gain is divided by the CPU-seconds the arm actually used; the "
               "executed arm's executions run inside its reward call, so they are in it "
               "(details.repeats[*].executed.executed_reward_cpu_share)"],
        details={"figure": fig, "difference": difference,
                 "budget_cpu_s": a.budget_cpu_s, "env_batch": a.env_batch, "train_tasks": a.train_tasks,
                 "train_states": train_states, "dev_tasks": a.dev_tasks, "dev_states": len(dev_states),
                 "sft_steps": a.sft_steps, "heads": a.heads, "collection_teacher": a.teacher,
                 "checkpoint_policy": a.checkpoint_policy,
                 "recipes": [f"configs/grpo/tiny-cpu.yaml (select_states all, checkpoint_policy "
                             f"{a.checkpoint_policy})",
                             "configs/grpo/tiny-cpu.yaml with the reward of configs/grpo/tiny-cpu-exec.yaml",
                             "configs/grpo/tiny-cpu-env.yaml"],
                 "start": {"dev_accuracy": base["accuracy"], "dev_closure": base["closure"],
                           "dev_outcomes": base["outcomes"]},
                 "setup_cpu_s": round(setup_cpu, 1), "repeats": repeats})
    path = run.write(result)
    if fig["defined"]:
        for pair, d in fig["differences"].items():
            print(f"accuracy gain per CPU-s, {pair}: mean {d['mean']} (95% CI {d['ci95'][0]} to {d['ci95'][1]})")
        print(f"ratios of medians: { {k: v['value'] for k, v in fig['ratios_of_medians'].items()} }")
    else:
        print(f"figure undefined: {fig['reason']}")
    print(f"wrote {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
