"""Configs of the state-SFT stage: TRL's dataclasses with this project's defaults, parsed by `TrlParser`.

A YAML recipe sets any field of the three dataclasses (unknown keys are an error); CLI flags override it:

    omnidecision sft --config configs/sft/tiny-cpu.yaml --learning_rate 1e-3 --max_steps 50
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import trl

from omnidecision.checkpoints import RESUME_DEFAULT, RESUME_HELP

logger = logging.getLogger(__name__)


@dataclass
class SFTScriptArguments(trl.ScriptArguments):
    """Where the data comes from (a harvested `DIR/sft` folder) and how much of it to use."""

    dataset_test_split: str = field(
        default="validation", metadata={"help": "Split used for evaluation when `eval_strategy` is not 'no'."}
    )
    max_train_seconds: float | None = field(
        default=None, metadata={"help": "Stop training after this many seconds of wall time (a compute-matched "
                                        "control: train as long as another stage ran). None: max_steps decides."})
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Keep only the first N training rows (after the seeded shuffle); None: all."}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Keep only the first N evaluation rows; None: all."}
    )
    enable_thinking: bool | None = field(
        default=None,
        metadata={
            "help": "Passed to the chat template as `enable_thinking` for every row (Qwen3 templates). Use the "
            "same value as collection and serving (train/serve parity); None: the template's default."
        },
    )

    def __post_init__(self) -> None:
        if hasattr(super(), "__post_init__"):
            super().__post_init__()
        for name in ("max_train_samples", "max_eval_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")


@dataclass
class PlannerSFTConfig(trl.SFTConfig):
    """`trl.SFTConfig` with planner defaults: loss on the assistant action only, padded batches, CPU-safe."""

    assistant_only_loss: bool = field(
        default=True, metadata={"help": "Loss on the assistant action only (needs {% generation %} in the template)."}
    )
    max_length: int | None = field(
        default=2048, metadata={"help": "Truncate tokenized rows to this many tokens (digest + action)."}
    )
    gradient_checkpointing: bool = field(
        default=False, metadata={"help": "Recompute activations in the backward pass (saves memory, costs time)."}
    )
    logging_steps: float = field(default=10, metadata={"help": "Log every N steps (or a ratio of total steps)."})
    save_strategy: str = field(default="steps", metadata={"help": "When to save checkpoints: no, steps, epoch."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Keep at most this many checkpoints."})
    compact_lm_head: bool = field(
        default=True,
        metadata={"help": "On the CPU, compute the LM head only at supervised positions (TRL does so on GPUs; "
                          "modeling.compact_lm_head). False: TRL's every-position path (the benchmark's baseline)."},
    )
    resume_from_checkpoint: str | None = field(default=RESUME_DEFAULT, metadata={"help": RESUME_HELP})
    cpu_fallback: bool = field(
        default=False,
        metadata={"help": "A bf16/fp16 recipe on a machine with no visible CUDA device: train on the CPU in float32 "
                          "(with a warning) instead of stopping with an error. Off by default: on a GPU node whose "
                          "GPUs are invisible the run must stop, not crawl on the CPU."},
    )

    def __post_init__(self) -> None:
        from omnidecision.preflight import check_precision

        check_precision(self, "SFT recipe")
        if isinstance(self.resume_from_checkpoint, str) and self.resume_from_checkpoint.lower() in ("false", "no", ""):
            self.resume_from_checkpoint = None
        if self.load_best_model_at_end and str(self.eval_strategy).lower().endswith("no"):
            # a recipe that keeps its best dev checkpoint, run with evaluation switched off: nothing to choose from
            logger.warning("eval_strategy=no: load_best_model_at_end switched off (no evaluation to pick a best from)")
            self.load_best_model_at_end = False
        super().__post_init__()


def make_parser() -> trl.TrlParser:
    """The parser of `omnidecision sft` (YAML via `--config`, CLI overrides)."""
    return trl.TrlParser((SFTScriptArguments, PlannerSFTConfig, trl.ModelConfig))


def parse_args(args: list[str] | None = None) -> tuple[SFTScriptArguments, PlannerSFTConfig, trl.ModelConfig]:
    """Parse `args` (default: sys.argv[1:]); unknown options or YAML keys raise a ValueError naming them."""
    script_args, training_args, model_args = make_parser().parse_args_and_config(args=args)
    return script_args, training_args, model_args
