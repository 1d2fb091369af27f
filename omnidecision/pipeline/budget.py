"""Budgets matched on what a stage consumed: optimizer rows (steps × batch × grad_accum), not wall-clock.

    python -m omnidecision.pipeline.budget --recipe configs/sft/tiny-cpu-continue.yaml \
        runs/demo/models/judge runs/demo/models/grpo_judge.r0-run      # prints the control's --max_steps

`consumed(run)` reads the Hugging Face Trainer's `trainer_state.json` in a run folder (global_step,
train_batch_size; every trainer of the project writes it: sft, grpo, judge train) and the recipe's
`gradient_accumulation_steps`; `matched_steps` turns the references' rows into the control's optimizer steps
(rounded up, so a control never gets less than its reference; it overshoots by less than one of its batches).
Rows of GRPO are completions (TRL's `per_device_train_batch_size` counts completions); of judge training, pairs.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from omnidecision.rollout.recipe import read_yaml  # the project's one YAML reader (errors name file and line)

logger = logging.getLogger(__name__)


class Consumed(BaseModel):
    """What one training run consumed."""

    steps: int
    batch: int
    grad_accum: int = 1
    rows: int
    tokens: int | None = None  # input tokens seen, when the trainer logged them


def _recipe_value(run: Path, key: str) -> Any:
    """A training argument of the run: the run's own record (sft_run.json) or its training_args (json dumps)."""
    for name in ("sft_run.json",):
        path = run / name
        if path.is_file():
            training = json.loads(path.read_text("utf-8")).get("recipe", {}).get("training", {})
            if key in training:
                return training[key]
    return None


def consumed(run: Path, grad_accum: int | None = None) -> Consumed:
    """The optimizer rows a finished run consumed, from its trainer_state.json (clear error when it is missing)."""
    path = Path(run) / "trainer_state.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no trainer_state.json (the run did not finish, or its trainer did not "
                                f"call save_state): its consumed budget is unknown")
    state = json.loads(path.read_text("utf-8"))
    for key in ("global_step", "train_batch_size"):
        if not isinstance(state.get(key), int):
            raise ValueError(f"{path}: field {key!r} missing or not an integer ({state.get(key)!r})")
    accum = grad_accum or _recipe_value(Path(run), "gradient_accumulation_steps") or 1
    tokens = state.get("num_input_tokens_seen") or None
    for entry in reversed(state.get("log_history", [])):  # GRPO logs the tokens it trained on as num_tokens
        if tokens is None and entry.get("num_tokens"):
            tokens = int(entry["num_tokens"])
    steps, batch = state["global_step"], state["train_batch_size"]
    return Consumed(steps=steps, batch=batch, grad_accum=int(accum), rows=steps * batch * int(accum), tokens=tokens)


def recipe_batch(recipe: Path) -> tuple[int, int]:
    """(per_device_train_batch_size, gradient_accumulation_steps) of a training recipe."""
    data = read_yaml(Path(recipe), "training recipe", ValueError) or {}
    batch = data.get("per_device_train_batch_size")
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"{recipe}: per_device_train_batch_size must be a positive integer to match a budget "
                         f"on rows, got {batch!r}")
    return batch, int(data.get("gradient_accumulation_steps") or 1)


def matched_steps(references: list[Path], recipe: Path) -> int:
    """The control's optimizer steps: the references' summed rows over the control's rows per step, rounded up."""
    rows = sum(consumed(r).rows for r in references)
    batch, accum = recipe_batch(recipe)
    steps = max(1, math.ceil(rows / (batch * accum)))
    logger.info("budget: %d rows consumed by %s -> %d steps of %d x %d rows", rows, [str(r) for r in references],
                steps, batch, accum)
    return steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="print a control's --max_steps matched on consumed rows")
    parser.add_argument("--recipe", type=Path, required=True, help="the control's training recipe")
    parser.add_argument("references", type=Path, nargs="+", help="finished run folders (trainer_state.json)")
    args = parser.parse_args(argv)
    print(matched_steps(args.references, args.recipe))


if __name__ == "__main__":
    main()
