"""Trajectory-level GRPO of the planner: the home-made baseline `bench_grpo_signal` measures decision-level GRPO
against. It stays as a cross-check of the gradient TRL takes; the baseline a TRL user would actually run is TRL's own
environment API (omnidecision/rollout/environment.py), which `bench_grpo_env` compares against.

Per optimizer step, `tasks_per_step` training tasks are each run K times by the agent loop (the planner is the
policy, sampled in-process; the other roles are the noise-free scripted teacher; tools really run), and every run
is rewarded by its judged final answer (1 correct, 0 not: `rollout.runner.judge_record`, the collection's judge).
The group of K runs of one task is the GRPO group: advantage = (r − mean) / (std + 1e-4) over the group, and every
planner decision of a run carries its run's advantage. Loss, for one policy update per generation batch (the
recipe's setting, so the importance ratio is 1 and clipping never acts), without a KL term (`beta: 0`), normalised
per token over the whole batch (`loss_type: dapo`) — the gradient TRL's GRPOTrainer takes with the same settings:

    loss = − Σ_runs A_run · Σ_decisions Σ_tokens log π(token) / (completion tokens in the batch)

The optimizer and schedule are built from the same GRPO recipe by transformers' own factories
(`Trainer.get_optimizer_cls_and_kwargs`, `get_scheduler`), with the recipe's gradient clipping.

`LocalPlanner` is a `ChatBackend` that batches the planner requests of concurrent runs into one `generate` call
(the way a server batches concurrent requests) and records each decision's token ids for the update.

    python -c "import bench.trajectory_grpo as t; help(t.train_trajectory_grpo)"
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import resource
import time
from dataclasses import dataclass, field
from typing import Any

from omnidecision.protocol.chat import ChatRequest, ChatResponse, Usage

logger = logging.getLogger(__name__)

# The decisions of the run the current asyncio task belongs to (each run is its own task: its own context copy).
_DECISIONS: contextvars.ContextVar[list[tuple[list[int], list[int]]] | None] = contextvars.ContextVar(
    "decisions", default=None)


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (user + system), in seconds: the budget's unit. Unlike
    wall time it is not inflated by other jobs on a shared machine."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class LocalPlanner:
    """The planner role served by an in-process transformers model: requests that arrive together (concurrent runs)
    are generated in one left-padded batch. Greedy unless `temperature` is set. With `record`, each decision's
    (prompt ids, completion ids incl. the end token) is appended to the calling run's list (`_DECISIONS`)."""

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float | None = None, max_new_tokens: int = 32,
                 max_batch: int = 64, record: bool = False) -> None:
        self.model, self.tok = model, tokenizer
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.max_batch, self.record = max_batch, record
        self.pending: list[tuple[list[dict], asyncio.Future, list | None]] = []
        self.flusher: asyncio.Task | None = None
        self.eos = {tokenizer.eos_token_id, tokenizer.pad_token_id} - {None}
        self.batches = 0

    async def chat(self, request: ChatRequest) -> ChatResponse:
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((request.messages, fut, _DECISIONS.get() if self.record else None))
        if self.flusher is None or self.flusher.done():
            self.flusher = asyncio.create_task(self._flush())
        return await fut

    async def _flush(self) -> None:
        for _ in range(8):  # let the other runs reach their planner call, so they share this batch
            await asyncio.sleep(0)
        while self.pending:
            batch, self.pending = self.pending[:self.max_batch], self.pending[self.max_batch:]
            try:
                outs = self._generate([m for m, _, _ in batch])
            except Exception as exc:  # a failed batch fails its requests, never the event loop
                for _, fut, _ in batch:
                    fut.set_exception(exc)
                continue
            for (_, fut, sink), (prompt_ids, completion_ids, text) in zip(batch, outs, strict=True):
                if sink is not None:
                    sink.append((prompt_ids, completion_ids))
                fut.set_result(ChatResponse(text=text, usage=Usage(prompt_tokens=len(prompt_ids),
                                                                   completion_tokens=len(completion_ids))))

    def _generate(self, messages: list[list[dict]]) -> list[tuple[list[int], list[int], str]]:
        import torch

        from omnidecision.modeling import render_prompts

        self.batches += 1
        texts = render_prompts(self.tok, messages)  # the served chat template and its options (parity)
        prompts = [self.tok(t, add_special_tokens=False).input_ids for t in texts]
        width = max(len(p) for p in prompts)
        pad = self.tok.pad_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "pad_token_id": pad,
                                  "eos_token_id": sorted(self.eos), "do_sample": self.temperature is not None}
        if self.temperature is not None:
            kwargs.update(temperature=self.temperature, top_p=1.0, top_k=0)
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        self.model.train(was_training)
        results = []
        for row, prompt in zip(out[:, width:].tolist(), prompts, strict=True):
            completion = []
            for t in row:  # up to and including the first end token, as TRL's completion mask does
                completion.append(t)
                if t in self.eos:
                    break
            text = self.tok.decode([t for t in completion if t not in self.eos], skip_special_tokens=True)
            results.append((prompt, completion, text))
        return results


@dataclass
class Rollouts:
    """One generation batch: per run its task index, reward and decisions."""

    task_index: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    decisions: list[list[tuple[list[int], list[int]]]] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)


async def _rollouts(tasks: list[Any], k: int, planner: LocalPlanner, teacher: Any, config: Any,
                    step: int) -> Rollouts:
    from omnidecision.agent.loop import run_task
    from omnidecision.rollout.runner import judge_record

    backends = {"default": teacher, "planner": planner}

    async def one(i: int, sample: int) -> tuple[int, float, list, str]:
        decisions: list[tuple[list[int], list[int]]] = []
        _DECISIONS.set(decisions)
        record = await run_task(tasks[i], config, backends, sample=sample, run_id=f"{tasks[i].id}-g{step}-s{sample}")
        judged = await judge_record(tasks[i], record, None)
        return i, 1.0 if judged.correct else 0.0, decisions, record.outcome

    done = await asyncio.gather(*(one(i, s) for i in range(len(tasks)) for s in range(k)))
    out = Rollouts()
    for i, r, d, o in done:
        out.task_index.append(i)
        out.rewards.append(r)
        out.decisions.append(d)
        out.outcomes.append(o)
    return out


def group_advantages(rewards: list[float], k: int) -> list[float]:
    """(r − group mean) / (group std + 1e-4), groups of `k` consecutive runs; std with Bessel's correction (TRL's
    `nanstd`, `scale_rewards: group`).

    >>> [round(a, 3) for a in group_advantages([1.0, 0.0, 0.0, 0.0], 4)]
    [1.5, -0.5, -0.5, -0.5]
    >>> group_advantages([1.0, 1.0], 2)
    [0.0, 0.0]
    """
    import statistics

    out = []
    for g in range(0, len(rewards), k):
        group = rewards[g:g + k]
        mean = statistics.fmean(group)
        std = statistics.stdev(group) if len(group) > 1 else 0.0
        out += [(r - mean) / (std + 1e-4) for r in group]
    return out


def policy_gradient_step(model: Any, batch: Rollouts, advantages: list[float], pad_id: int,
                         micro_batch: int = 32) -> dict[str, float]:
    """Accumulate the batch's gradient (see the module docstring) in micro-batches; returns the loss and token
    counts. Decisions of runs with a zero advantage add nothing to the gradient and are skipped (they still count
    in the token normaliser)."""
    import torch

    seqs = [(p, c, a) for ds, a in zip(batch.decisions, advantages, strict=True) for p, c in ds]
    total_tokens = sum(len(c) for _, c, _ in seqs)
    active = [s for s in seqs if abs(s[2]) > 1e-9]
    loss_sum = 0.0
    model.train()
    for start in range(0, len(active), micro_batch):
        chunk = active[start:start + micro_batch]
        width = max(len(p) + len(c) for p, c, _ in chunk)
        ids = torch.full((len(chunk), width), pad_id)
        attn = torch.zeros((len(chunk), width), dtype=torch.long)
        target = torch.zeros((len(chunk), width), dtype=torch.bool)  # positions of completion tokens
        adv = torch.tensor([a for _, _, a in chunk], dtype=torch.float32)
        for row, (p, c, _) in enumerate(chunk):
            ids[row, :len(p) + len(c)] = torch.tensor(p + c)
            attn[row, :len(p) + len(c)] = 1
            target[row, len(p):len(p) + len(c)] = True
        logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
        logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        mask = target[:, 1:]
        loss = -(adv.unsqueeze(1) * logp * mask).sum() / max(total_tokens, 1)
        loss.backward()
        loss_sum += float(loss.detach())
    return {"loss": loss_sum, "completion_tokens": total_tokens, "decisions": len(seqs),
            "decisions_with_signal": len(active)}


class CpuTailAverage:
    """Tail weight averaging (omnidecision.rl.averaging) over the last `1 - start` of a CPU-second budget instead of
    a step count: snapshots of the running mean after every optimizer step once `clock()` (CPU-seconds since
    training began) reaches `start * budget`. A TrainerCallback for TRL (the model comes with the callback
    arguments; the mean is written into the model when training ends, before the trainer saves it), and callable by
    hand (`step(model, global_step)`, `apply()`) from a plain loop."""

    def __init__(self, clock: Any, budget: float, start: float = 0.5) -> None:
        from transformers import TrainerCallback

        from omnidecision.rl.averaging import TailWeightAverage

        self.clock, self.threshold = clock, start * budget
        self.inner = TailWeightAverage(None, start)
        self.inner.start_step = None  # fixed when the CPU clock crosses the threshold
        outer = self

        class Callback(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                outer.step(kwargs["model"], state.global_step)

            def on_train_end(self, args, state, control, **kwargs):
                outer.apply()

        self.callback = Callback()
        self.applied = 0

    def step(self, model: Any, global_step: int) -> None:
        from types import SimpleNamespace

        if self.inner.start_step is None:
            if self.clock() < self.threshold:
                return
            self.inner.start_step, self.inner.model = global_step, model
        self.inner.on_step_end(None, SimpleNamespace(global_step=global_step), None)

    def apply(self) -> int:
        if self.inner.model is not None and self.inner.mean is not None:
            self.applied = self.inner.apply()
        return self.applied


def train_trajectory_grpo(model: Any, tokenizer: Any, train_tasks: list[Any], training_args: Any, *,
                          budget_cpu_s: float, tasks_per_step: int, teacher: Any, agent_config: Any,
                          seed: int, average_start: float | None = None) -> dict[str, Any]:
    """Train `model` in place until `budget_cpu_s` CPU-seconds are spent (checked before each step; the last step
    may run over, and the CPU-seconds actually used are reported). Settings from `training_args` (the GRPO
    recipe): num_generations (K), temperature, max_completion_length, optimizer, lr schedule, max_grad_norm.
    `average_start`: keep the mean of the weights over the last `1 - average_start` of the budget (CpuTailAverage)."""
    import torch
    from transformers import Trainer, get_scheduler

    torch.manual_seed(seed)
    rng = random.Random(seed)
    k = training_args.num_generations
    opt_cls, opt_kwargs = Trainer.get_optimizer_cls_and_kwargs(training_args, model)
    optimizer = opt_cls([p for p in model.parameters() if p.requires_grad], **opt_kwargs)
    scheduler = get_scheduler(training_args.lr_scheduler_type, optimizer,
                              num_warmup_steps=training_args.get_warmup_steps(10_000), num_training_steps=10_000)
    planner = LocalPlanner(model, tokenizer, temperature=training_args.temperature,
                           max_new_tokens=training_args.max_completion_length, record=True)
    order: list[int] = []
    log: list[dict[str, Any]] = []
    start_cpu, start_wall = cpu_seconds(), time.perf_counter()
    averager = None if average_start is None else CpuTailAverage(lambda: cpu_seconds() - start_cpu, budget_cpu_s,
                                                                 average_start)
    step = 0
    while cpu_seconds() - start_cpu < budget_cpu_s:
        if len(order) < tasks_per_step:  # epochs over the training tasks in a seeded order
            fresh = list(range(len(train_tasks)))
            rng.shuffle(fresh)
            order += fresh
        picked, order = order[:tasks_per_step], order[tasks_per_step:]
        t0 = cpu_seconds()
        batch = asyncio.run(_rollouts([train_tasks[i] for i in picked], k, planner, teacher, agent_config, step))
        rollout_cpu = cpu_seconds() - t0
        advantages = group_advantages(batch.rewards, k)
        optimizer.zero_grad(set_to_none=True)
        stats = policy_gradient_step(model, batch, advantages, tokenizer.pad_token_id)
        if not stats["decisions_with_signal"]:  # as in the Trainer: a zero gradient, and the optimizer still steps
            for p in model.parameters():
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
        torch.nn.utils.clip_grad_norm_(model.parameters(), training_args.max_grad_norm)
        optimizer.step()
        scheduler.step()
        step += 1
        if averager is not None:
            averager.step(model, step)
        groups = [batch.rewards[g:g + k] for g in range(0, len(batch.rewards), k)]
        log.append({"step": step, "reward_mean": round(sum(batch.rewards) / len(batch.rewards), 4),
                    "frac_groups_zero_std": round(sum(len(set(g)) == 1 for g in groups) / len(groups), 4),
                    "rollout_cpu_s": round(rollout_cpu, 2), "cpu_s": round(cpu_seconds() - start_cpu, 2),
                    **stats})
        logger.info("trajectory GRPO step %d: %s", step, log[-1])
    used = cpu_seconds() - start_cpu
    averaged = averager.apply() if averager is not None else 0
    model.eval()
    return {"steps": step, "cpu_s": round(used, 2), "averaged_snapshots": averaged,
            "wall_s": round(time.perf_counter() - start_wall, 2), "log": log,
            "decisions": sum(e["decisions"] for e in log),
            "decisions_with_signal": sum(e["decisions_with_signal"] for e in log)}


async def _eval_runs(tasks: list[Any], planner: LocalPlanner, teacher: Any, config: Any) -> list[tuple[bool, str]]:
    from omnidecision.agent.loop import run_task
    from omnidecision.rollout.runner import judge_record

    backends = {"default": teacher, "planner": planner}

    async def one(task: Any) -> tuple[bool, str]:
        record = await run_task(task, config, backends, sample=0)
        return bool((await judge_record(task, record, None)).correct), record.outcome

    return list(await asyncio.gather(*(one(t) for t in tasks)))


def in_loop_accuracy(model: Any, tokenizer: Any, tasks: list[Any], *, teacher: Any, agent_config: Any,
                     max_new_tokens: int = 32) -> tuple[list[bool], dict[str, int]]:
    """Greedy planner in the loop on `tasks` (one run each, the same noise-free teacher for the other roles):
    per task, judged correct or not; and the count of each stop outcome (accepted, budget, stuck…)."""
    from collections import Counter

    planner = LocalPlanner(model, tokenizer, temperature=None, max_new_tokens=max_new_tokens)
    runs = asyncio.run(_eval_runs(tasks, planner, teacher, agent_config))
    return [c for c, _ in runs], dict(sorted(Counter(o for _, o in runs).items()))
