"""Closure-reward throughput (decisions/s) and reward time as a share of GRPO step time on the tiny CPU planner.

    .venv/bin/python bench/bench_rewards.py [--states 512 --k 8 --grpo-steps 6]

Prints the ratios and writes bench/results/rewards.json. Throughput: the combined closure rubric (7 checks, ledger
JSON parsed per distinct state) over K candidate decisions per RL state, a mix of teacher actions, premature
finishes, random calls and garbage. Share: a short GRPO run (configs/grpo/tiny-cpu.yaml, from-scratch tiny model,
transformers generation) with the reward functions wrapped in timers; share = reward seconds / train seconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import tempfile
import time
from functools import wraps
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def candidates(row: dict, k: int, rng: random.Random) -> list[str]:
    from omnidecision.protocol.rule import rule_decision_text
    from omnidecision.rewards.checks import load_ledger

    state = load_ledger(row["ledger"])
    pool = [rule_decision_text(state), rule_decision_text(state, explicit_query=True), '{"action": "finish"}', "",
            "I will search.", json.dumps({"action": "call", "need": rng.randrange(max(len(state.needs), 1)),
                                          "query": state.question})]
    return [rng.choice(pool) for _ in range(k)]


def throughput(states: int, k: int, repeats: int = 3) -> dict:
    from omnidecision.rewards import CHECKS, closure_reward
    from omnidecision.rewards.checks import Decision, load_ledger
    from omnidecision.rl.data import rl_rows

    rng = random.Random(0)
    rows = rl_rows(states, seed=11)
    completions = [c for row in rows for c in candidates(row, k, rng)]
    ledgers = [row["ledger"] for row in rows for _ in range(k)]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        closure_reward(completions, ledger=ledgers)
        times.append(time.perf_counter() - start)
    best = min(times)
    decisions = [Decision.parse(c) for c in completions[:2000]]
    parsed = [load_ledger(s) for s in ledgers[:2000]]
    per_check = {}
    for name, check in CHECKS.items():
        start = time.perf_counter()
        for d, s in zip(decisions, parsed, strict=True):
            check(d, s)
        per_check[name] = round(len(decisions) / (time.perf_counter() - start))
    return {"decisions": len(completions), "seconds_best": round(best, 4),
            "decisions_per_s": round(len(completions) / best), "seconds_runs": [round(t, 4) for t in times],
            "per_check_decisions_per_s": per_check}


def grpo_share(steps: int) -> dict:
    from omnidecision.rewards import get_reward_funcs
    from omnidecision.rl import train as rl_train
    from omnidecision.rl.config import parse_args
    from omnidecision.rl.data import write_rl_dataset
    from omnidecision.synthetic.tiny import build_tiny_planner, default_corpus

    timers: dict[str, float] = {}

    def timed(func):
        name = func.__name__

        @wraps(func)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                timers[name] = timers.get(name, 0.0) + time.perf_counter() - start
        return wrapper

    original = get_reward_funcs
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = build_tiny_planner(work / "tiny", texts=list(default_corpus(n=300)), hidden=64, layers=2)
        data = write_rl_dataset(work / "harvest", n_train=256, n_validation=8, seed=5)
        args = parse_args(["--config", str(ROOT / "configs/grpo/tiny-cpu.yaml"), "--model_name_or_path", str(model),
                           "--dataset_name", str(data), "--output_dir", str(work / "grpo"), "--max_steps", str(steps),
                           "--eval_closure_n", "0", "--save_strategy", "no", "--log_completions", "false",
                           "--reward_funcs", "closure", "format", "finish", "target", "tool", "query", "no_repeat",
                           "modality", "--reward_weights", "1", "0", "0", "0", "0", "0", "0", "0"])
        import omnidecision.rewards as rewards_pkg

        rewards_pkg.get_reward_funcs = lambda names, **p: [timed(f) for f in original(names, **p)]
        try:
            report = rl_train.main(*args)
        finally:
            rewards_pkg.get_reward_funcs = original
    train_s = report["train_seconds"]
    reward_s = sum(timers.values())
    return {"steps": steps, "train_seconds": train_s, "seconds_per_step": round(train_s / steps, 4),
            "reward_seconds": round(reward_s, 4), "reward_share": round(reward_s / train_s, 5),
            "reward_seconds_by_func": {k: round(v, 4) for k, v in timers.items()}, "reward_funcs": 8,
            "completions_per_step": 16, "note": "rewards.get_reward_funcs patched to time each reward call"}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--states", type=int, default=512)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--grpo-steps", type=int, default=6)
    a = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    result = {"throughput": throughput(a.states, a.k), "grpo": grpo_share(a.grpo_steps)}
    out = ROOT / "bench/results/rewards.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    t, g = result["throughput"], result["grpo"]
    print(f"closure reward: {t['decisions_per_s']} decisions/s ({t['decisions']} decisions in {t['seconds_best']} s)")
    print(f"GRPO: {g['seconds_per_step']} s/step; rewards {g['reward_seconds']} s of {g['train_seconds']} s "
          f"= {100 * g['reward_share']:.3f}% of step time")
