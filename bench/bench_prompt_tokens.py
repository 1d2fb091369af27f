"""Planner prompt tokens per step: the ledger digest against the react history, on the same tasks and budgets.

The scripted teacher drives the agent in `ledger` and in `react` mode over the same synthetic tasks (same noise,
same step budget); every planner prompt actually sent is tokenised with the tiny planner's chat template.
Prints the mean prompt tokens at each step, the ratio react/ledger at step 15 (or the last step both reach) and
the max/min over steps within each mode, and writes bench/results/prompt_tokens.json.

    .venv/bin/python -m bench.bench_prompt_tokens --tasks 60
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

from bench.common import write_result


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tasks", type=int, default=60)
    p.add_argument("--noise", type=float, default=0.4, help="teacher noise: longer, messier runs")
    p.add_argument("--step-budget", type=int, default=15)
    a = p.parse_args(argv)

    from transformers import AutoTokenizer

    from omnidecision.agent.config import AgentConfig
    from omnidecision.agent.loop import run_task
    from omnidecision.backends.factory import build_backends
    from omnidecision.protocol.chat import BackendSpec
    from omnidecision.synthetic.tiny import build_tiny_planner
    from omnidecision.tasks import synth

    with tempfile.TemporaryDirectory() as tmp:
        synth.write_suite(a.tasks, 7, Path(tmp) / "synth")
        tasks = synth.load_suite(Path(tmp) / "synth")
        tok = AutoTokenizer.from_pretrained(build_tiny_planner(Path(tmp) / "tiny"))
        backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": a.noise})})
        per_mode: dict[str, dict[int, list[int]]] = {}
        for mode in ("ledger", "react"):
            config = AgentConfig(mode=mode, step_budget=a.step_budget)

            async def run_all(config=config):
                return await asyncio.gather(*[run_task(t, config, backends) for t in tasks])

            by_step: dict[int, list[int]] = defaultdict(list)
            for record in asyncio.run(run_all()):
                for i, step in enumerate(record.steps, start=1):
                    text = tok.apply_chat_template(step.planner_messages, tokenize=False, add_generation_prompt=True)
                    by_step[i].append(len(tok(text, add_special_tokens=False).input_ids))
            per_mode[mode] = by_step
    common = sorted(set(per_mode["ledger"]) & set(per_mode["react"]))
    at = a.step_budget if a.step_budget in common else common[-1]
    means = {m: {s: round(statistics.fmean(v), 1) for s, v in sorted(d.items())} for m, d in per_mode.items()}
    result = {
        "benchmark": "planner prompt tokens per step, ledger digest vs react history (same tasks, same budgets)",
        "tasks": a.tasks, "noise": a.noise, "step_budget": a.step_budget,
        "mean_tokens_by_step": means,
        "at_step": at,
        "ratio_react_over_ledger_at_step": round(means["react"][at] / means["ledger"][at], 3),
        "max_over_min": {m: round(max(v.values()) / min(v.values()), 3) for m, v in means.items()},
        "runs_reaching_step": {m: len(per_mode[m][at]) for m in per_mode},
    }
    out = write_result("prompt_tokens", result)
    print(f"step {at}: ledger {means['ledger'][at]} tokens, react {means['react'][at]} tokens "
          f"→ react/ledger = {result['ratio_react_over_ledger_at_step']}×")
    print(f"max/min over steps: ledger {result['max_over_min']['ledger']}×, react {result['max_over_min']['react']}×")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
