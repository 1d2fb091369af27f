"""Tail weight averaging for GRPO (stochastic weight averaging over the last part of the run).

GRPO's updates on a small planner are noisy: with Adam, directions that carry no reward signal still move by
about the learning rate every step, so the held-out reward of successive checkpoints swings around its trend.
Averaging the weights over the tail of the run keeps the trend and cancels most of the swing. Measured on the
demo's harvest (same SFT start, 150 GRPO steps, 366 held-out states, per-state delta vs the start): checkpoints
every 25 steps of two seeds ranged from -0.046 to +0.024; the average of the same checkpoints gave +0.027 and
+0.040 (docs/research/rl-recipe.md).

    omnidecision grpo --config configs/grpo/tiny-cpu.yaml --weight_average true [--weight_average_start 0.5]

Only trainable parameters are averaged (a LoRA run averages its adapter, not the frozen base), in float32 on
each parameter's device. With ZeRO-3/FSDP the parameters are sharded and this is refused before anything loads, by
the dry run and the run in the same words (`rl/dryrun.py:weight_average_checks`; `check_supported` here).
The running average is saved next to each checkpoint (`weight_average.pt`) and picked up on resume.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from omnidecision.preflight import require, sharded_parameters
from omnidecision.rl.dryrun import weight_average_checks

logger = logging.getLogger(__name__)

STATE_FILE = "weight_average.pt"


class TailWeightAverage(TrainerCallback):
    """Running mean of the trainable weights, taken every `every` optimiser steps over the last `1 - start`
    of the run (the first averaged step is fixed when training begins and the trainer knows its step count).
    `apply()` (called by omnidecision.rl.train after training, once the last weights are evaluated) replaces the
    model's weights by the mean; the trainer then saves that."""

    def __init__(self, model: Any, start: float = 0.5, every: int = 1, resume_from: str | Path | None = None) -> None:
        if not 0.0 <= start < 1.0 or every < 1:
            raise ValueError(f"weight averaging: start in [0, 1) and every >= 1 required, got {start}, {every}")
        self.model, self.start, self.every = model, start, every
        self.start_step = 1
        self.mean: dict[str, Any] | None = None
        self.count = 0
        if resume_from is not None and (Path(resume_from) / STATE_FILE).exists():
            import torch

            saved = torch.load(Path(resume_from) / STATE_FILE, map_location="cpu", weights_only=True)
            self.count = int(saved["count"])
            params = dict(self._params())
            self.mean = {k: v.to(params[k].device) for k, v in saved["mean"].items()}
            logger.info("weight averaging: resumed a mean of %d snapshots from %s", self.count, resume_from)

    def _params(self) -> list[tuple[str, Any]]:
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.start_step = start_step(state.max_steps, self.start)
        logger.info("weight averaging: mean of the trainable weights over steps %d..%d (every %d)", self.start_step,
                    state.max_steps, self.every)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = state.global_step
        if step < self.start_step or (step - self.start_step) % self.every:
            return
        import torch

        with torch.no_grad():
            self.count += 1
            if self.mean is None:
                self.mean = {n: p.detach().float().clone() for n, p in self._params()}
                return
            for n, p in self._params():
                self.mean[n].add_(p.detach().float() - self.mean[n], alpha=1.0 / self.count)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.mean is None or not state.is_world_process_zero:
            return
        import torch

        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            torch.save({"count": self.count, "mean": {k: v.cpu() for k, v in self.mean.items()}}, folder / STATE_FILE)

    def apply(self) -> int:
        """Write the mean into the model's weights; returns the number of snapshots averaged (0: nothing done)."""
        if self.mean is None:
            logger.warning("weight averaging: no snapshot taken (the run ended before step %d)", self.start_step)
            return 0
        import torch

        with torch.no_grad():
            for n, p in self._params():
                p.copy_(self.mean[n].to(p.dtype))
        logger.info("weight averaging: the model now holds the mean of %d snapshots (steps %d..%d, every %d)",
                    self.count, self.start_step, self.start_step + (self.count - 1) * self.every, self.every)
        applied, self.mean = self.count, None  # applied once
        return applied


def start_step(max_steps: int, fraction: float) -> int:
    """First averaged step for averaging over the last `1 - fraction` of a `max_steps` run: the first step at or
    after `fraction * max_steps` (at least step 1; 1e-9 absorbs float error such as 0.7 * 10 = 7.000000000000001).

    >>> start_step(150, 0.5), start_step(150, 0.0), start_step(10, 0.99), start_step(10, 0.7)
    (75, 1, 10, 7)
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"weight_average_start is a fraction of the run in [0, 1), got {fraction}")
    return max(1, min(max_steps, math.ceil(max_steps * fraction - 1e-9)))


def check_supported(training_args: Any) -> None:
    """Refuse sharded parameters (ZeRO-3, FSDP): each rank would average only its shard. Looks at the training
    arguments and at what `accelerate launch` exports for its config file. `rl/train.py:prepare_run` has refused
    this before anything loaded (`grpo_checks`); this guards a caller that builds its own trainer, in the same words
    (a `PreflightError`, a ValueError)."""
    require(weight_average_checks(sharded_parameters(training_args)))
