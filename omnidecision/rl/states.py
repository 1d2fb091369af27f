"""The states a GRPO run trains on, in the order it consumes them: one function for GRPO and for its rft control.

`training_states` loads the RL splits, keeps `max_train_samples`, shuffles by the seed and applies `select_states`
(balanced: rl/select.py) exactly as `omnidecision grpo` does; `consumed_indices` lists which of those states the
first N optimizer steps turn into generation groups, by iterating TRL's own `RepeatSampler` with the trainer's
arguments (one generation of `generation_batch_size / num_generations` prompts every `steps_per_generation *
num_iterations` micro-steps, each epoch a fresh permutation from the same generator). `rft-select` samples its K
decisions on exactly those states; `StateRecorder` writes the ones GRPO actually scored (tests compare the two).

    python -c "from omnidecision.rl.states import consumed_indices; help(consumed_indices)"
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from omnidecision.rl.select import balanced_selection
from omnidecision.rl.sources import load_grpo_states

logger = logging.getLogger(__name__)

STATE_ID_COLUMNS = ("task_id", "run_id", "step")


def decoding_options(script_args: Any, training_args: Any) -> dict[str, Any]:
    """How the start planner decodes for the balanced selection and the held-out evaluation (the same settings,
    so "right" means the same thing in both)."""
    return dict(max_new_tokens=training_args.max_completion_length, batch_size=script_args.eval_batch_size,
                weights=script_args.closure_weights, gate_on_tool=script_args.closure_gate_on_tool,
                chat_template_kwargs=training_args.chat_template_kwargs)


def load_states(script_args: Any, training_args: Any) -> tuple[Any, Any, dict[str, Any] | None]:
    """(train states before selection, held-out states, the mix's stats): the recipe's splits — `dataset_name`, or
    its `state_sources` mixed by weight (rl/sources.py: e.g. the planner's own states beside the teacher's; None
    for `dataset_name`) —, `max_train_samples`, seeded shuffle."""
    splits, mix = load_grpo_states(script_args, seed=training_args.seed)
    train = splits[script_args.dataset_train_split]
    heldout = splits[script_args.dataset_test_split]
    if script_args.max_train_samples:
        train = train.select(range(min(script_args.max_train_samples, len(train))))
    return train.shuffle(seed=training_args.seed), heldout, mix


def select(model: Any, tokenizer: Any, train: Any, script_args: Any, training_args: Any) -> tuple[Any, dict]:
    """The training states after `select_states` (all, or balanced by the start planner's greedy decisions; a
    resumed run selects again from the same start planner: the same states, so the data order carries on)."""
    if script_args.select_states != "balanced":
        return train, {"mode": "all", "kept": len(train)}
    train, selection = balanced_selection(model, tokenizer, train, right_ratio=script_args.select_right_ratio,
                                          seed=training_args.seed, **decoding_options(script_args, training_args))
    per_generation = training_args.generation_batch_size // training_args.num_generations
    if len(train) < per_generation:
        raise ValueError(f"state selection kept {len(train)} training states, fewer than one generation batch "
                         f"needs ({per_generation})")
    return train.shuffle(seed=training_args.seed), selection


def consumed_indices(n_states: int, training_args: Any, steps: int | None = None) -> list[int]:
    """Indices (into the selected training states) of the prompts the first `steps` optimizer steps (default
    `max_steps`) generate groups for, in order; a state appears once per epoch that reaches it.

    >>> from types import SimpleNamespace as NS
    >>> args = NS(num_generations=2, generation_batch_size=4, steps_per_generation=1, num_iterations=1,
    ...           gradient_accumulation_steps=1, shuffle_dataset=False, seed=0, max_steps=3)
    >>> consumed_indices(5, args)
    [0, 1, 2, 3, 0, 1]
    """
    from trl.trainer.utils import RepeatSampler

    steps = training_args.max_steps if steps is None else steps
    k = training_args.num_generations
    per_generation = training_args.generation_batch_size // k
    repeat = training_args.num_iterations * training_args.steps_per_generation
    if n_states < per_generation:
        raise ValueError(f"{n_states} training states, fewer than one generation batch needs ({per_generation})")
    # micro-steps per optimizer step: gradient accumulation; a generation every `repeat` micro-steps
    generations = math.ceil(steps * training_args.gradient_accumulation_steps / repeat)
    sampler = RepeatSampler(range(n_states), mini_repeat_count=k, batch_size=per_generation, repeat_count=repeat,
                            shuffle=bool(training_args.shuffle_dataset), seed=training_args.seed)
    cycle = per_generation * k * repeat  # one generation's stretch of the sampler's stream
    out: list[int] = []
    while len(out) < generations * per_generation:
        stream = list(iter(sampler))  # one epoch (the trainer iterates the same sampler again for the next)
        for start in range(0, len(stream), cycle):
            out += stream[start:start + per_generation * k:k]
            if len(out) >= generations * per_generation:
                break
    return out[:generations * per_generation]


def state_id(row: dict[str, Any]) -> str:
    """A state's identity across the two stages: task, run and step of the recorded run it was reconstructed from."""
    return ":".join(str(row.get(c)) for c in STATE_ID_COLUMNS)


class StateRecorder:
    """Wraps GRPO's first reward function to record the state of each generation group it scores (one id per
    `num_generations` completions, in order: exact in one process; with several, TRL spreads a group's completions
    over the ranks) and count the completions; the name TRL logs stays the same."""

    def __init__(self, num_generations: int) -> None:
        self.k = num_generations
        self.ids: list[str] = []
        self.completions = 0

    def wrap(self, func: Callable[..., Any]) -> Callable[..., Any]:
        from trl.trainer.utils import get_callable_name

        def recorded(completions: list[Any], **kwargs: Any) -> Any:
            self.completions += len(completions)
            rows = [{c: kwargs.get(c, [None] * len(completions))[i] for c in STATE_ID_COLUMNS}
                    for i in range(0, len(completions), self.k)]
            self.ids += [state_id(r) for r in rows]
            return func(completions, **kwargs)

        recorded.__name__ = get_callable_name(func)
        return recorded
