"""Closure-reward cost: reward time as a share of a GRPO step, and the rubric's throughput (decisions/s).

    python -m bench.bench_rewards --grpo-steps 4 --repeats 3
    python -m bench.bench_rewards --smoke     # smoke size: runs, measures nothing (bench/common.py)

Per repeat: throughput = the combined closure rubric (7 checks) over K candidate decisions per fresh RL state (a
mix of teacher actions, premature finishes, random calls and garbage), from a cold ledger cache; share = a short
GRPO run (configs/grpo/tiny-cpu.yaml, its rewards, from-scratch tiny model, transformers generation) with every
reward call timed by TRL's own profiler (`reward_timer`): reward seconds per step over step seconds. Writes
bench/results/rewards.json. A reward timer that misses a measured step, or a figure of 0, stops the benchmark with one
line and no result (bench/common.py: NothingMeasured).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.common import ROOT, Run, Timer, grpo_smoke_args, parse_args
from bench.schema import Arm, measure


def candidates(row: dict, k: int, rng: random.Random) -> list[str]:
    from omnidecision.protocol.rule import rule_decision_text
    from omnidecision.rewards.checks import load_ledger

    state = load_ledger(row["ledger"])
    pool = [rule_decision_text(state), rule_decision_text(state, explicit_query=True), '{"action": "finish"}', "",
            "I will search.", json.dumps({"action": "call", "need": rng.randrange(max(len(state.needs), 1)),
                                          "query": state.question})]
    return [rng.choice(pool) for _ in range(k)]


def throughput(states: int, k: int, seed: int) -> dict:
    """Decisions/s of the combined rubric on `states` fresh RL states x `k` candidates, from a cold ledger cache
    (the K candidates of one state still share its parsed ledger, as in a GRPO step)."""
    from omnidecision.rewards import closure_reward
    from omnidecision.rewards.decision import clear_ledger_cache
    from omnidecision.rl.data import rl_rows

    rng = random.Random(seed)
    rows = rl_rows(states, seed=11 + seed)
    completions = [c for row in rows for c in candidates(row, k, rng)]
    ledgers = [row["ledger"] for row in rows for _ in range(k)]
    clear_ledger_cache()  # no state of this repeat was parsed before it
    start = time.perf_counter()
    closure_reward(completions, ledger=ledgers)
    seconds = time.perf_counter() - start
    return {"decisions": len(completions), "seconds": seconds, "decisions_per_s": len(completions) / seconds}


@contextlib.contextmanager
def reward_timer(timer: Timer) -> Iterator[None]:
    """Inside this block, every reward function call of a TRL GRPOTrainer adds its seconds to `timer`, keyed by the
    optimizer step it ran in and named by the function.

    The hook is TRL's own profiler, which times each reward call inside `GRPOTrainer._calculate_rewards`: a block
    that closes while a `_calculate_rewards` block is open is a reward function's call. Patched on the profiler's
    class, it times whatever the trainer calls, however the project builds or imports its reward functions (a patch
    of `omnidecision.rewards.get_reward_funcs` missed every call once rl/train.py imported the name at load time).
    """
    from trl.extras.profiling import ProfilingContext  # deferred: trl loads torch

    enter, log = ProfilingContext.__enter__, ProfilingContext._log_metrics
    open_rewards: list[ProfilingContext] = []

    def entered(self: ProfilingContext) -> ProfilingContext:
        if self.name.endswith("._calculate_rewards"):
            open_rewards.append(self)
        return enter(self)

    def logged(self: ProfilingContext, duration: float) -> None:
        if self in open_rewards:
            open_rewards.remove(self)
        elif open_rewards:  # a block inside the open _calculate_rewards: one reward function's call
            timer.add(duration, key=self.step, name=self.name.split(".", 1)[-1])
        log(self, duration)

    ProfilingContext.__enter__, ProfilingContext._log_metrics = entered, logged
    try:
        yield
    finally:
        ProfilingContext.__enter__, ProfilingContext._log_metrics = enter, log


def grpo_share(run: Run, model: Path, data: Path, work: Path, steps: int, seed: int,
               extra: list[str] | None = None) -> dict:
    """A short GRPO run with every reward call timed (`reward_timer`; cold ledger cache): seconds per step and
    reward seconds per step. The first step (warm-up: allocation, first generate) is left out of both figures; the
    timer must have fired in every other step."""
    from omnidecision.rewards.decision import clear_ledger_cache  # the bench loads no project code before it runs
    from omnidecision.rl import train as rl_train  # loads TRL and torch
    from omnidecision.rl.config import parse_args  # loads TRL

    out = work / f"grpo-{seed}"
    args = parse_args(["--config", str(ROOT / "configs/grpo/tiny-cpu.yaml"), "--model_name_or_path", str(model),
                       "--dataset_name", str(data), "--output_dir", str(out), "--max_steps", str(steps + 1),
                       "--eval_closure_n", "0", "--save_strategy", "no", "--log_completions", "false",
                       "--select_states", "all", "--weight_average", "false", "--logging_steps", "1",
                       "--seed", str(seed), *(extra or [])])
    timer = run.timer(f"reward calls (GRPO seed {seed})")
    clear_ledger_cache()
    with reward_timer(timer):
        rl_train.main(*args)
    measured = range(1, steps + 1)  # the trainer's global_step while it computes step 2, 3, ... (0: the warm-up)
    timer.require(measured)
    step_s = [h["step_time"] for h in json.loads((out / "log_history.json").read_text()) if "step_time" in h][1:]
    return {"seconds_per_step": statistics.fmean(step_s),
            "reward_seconds_per_step": statistics.fmean(timer.seconds(step) for step in measured),
            "reward_seconds_by_func": {k: round(v, 5) for k, v in timer.by_name(measured).items()}}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--states", type=int, default=512)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--grpo-steps", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    a = parse_args(p, argv, smoke={"states": 4, "k": 2, "grpo_steps": 1, "repeats": 3})
    logging.basicConfig(level=logging.WARNING)
    run = Run("rewards", a.smoke)
    from omnidecision.rl.data import write_rl_dataset
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    tp, grpo = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = build_tiny_planner(work / "tiny", texts=list(default_corpus(n=300)), hidden=64, layers=2)
        data = write_rl_dataset(work / "harvest", n_train=256, n_validation=8, seed=5)
        for r in range(a.repeats):
            tp.append(throughput(a.states, a.k, seed=r))
            grpo.append(grpo_share(run, model, data, work, a.grpo_steps, seed=r, extra=grpo_smoke_args(a.smoke)))
            print(f"repeat {r}: {tp[-1]['decisions_per_s']:.0f} decisions/s; GRPO {grpo[-1]['seconds_per_step']:.3f} "
                  f"s/step, rewards {grpo[-1]['reward_seconds_per_step']:.5f} s/step", flush=True)
    arms = {
        "reward": Arm(label="the recipe's rewards (closure rubric + format) inside a GRPO step", figures={
            "seconds_per_step": measure([g["reward_seconds_per_step"] for g in grpo], "s/step"),
            "rubric_decisions_per_s": measure([t["decisions_per_s"] for t in tp], "decisions/s")}),
        "grpo_step": Arm(label="one GRPO step of the tiny CPU recipe (generation, rewards, update)", figures={
            "seconds_per_step": measure([g["seconds_per_step"] for g in grpo], "s/step")}),
    }
    result = run.result(
        title="closure-reward cost: reward time as a share of a GRPO step, and rubric throughput",
        arms=arms, candidate="reward", baseline="grpo_step", metric="seconds_per_step", repeats=a.repeats,
        better="lower: the rewards take that fraction of a GRPO step's time (scoring without execution is cheap)",
        notes=["ledger parse cache cleared before every repeat (no warm cache); the K candidates of one state share "
               "its parsed ledger, as in a real step",
               "every reward function call timed by TRL's own profiler (bench_rewards.reward_timer), keyed by the "
               "optimizer step; each GRPO run has one extra first step (warm-up) that neither figure counts"],
        details={"states": a.states, "k": a.k, "grpo_steps": a.grpo_steps,
                 "decisions_per_repeat": tp[0]["decisions"],
                 "reward_seconds_by_func": [g["reward_seconds_by_func"] for g in grpo]})
    path = run.write(result)
    print(f"reward share of a GRPO step: {result.ratio} (per repeat {result.ratio_repeats}) → {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
