"""Configs of the learned reward judge (`omnidecision judge train`): TRL's RewardConfig and ModelConfig with this
project's defaults and the judge's data fields, parsed by `TrlParser` from a recipe under configs/judge/.

    omnidecision judge train --config configs/judge/tiny-cpu.yaml --dataset_name runs/demo/data/rl \
        --model_name_or_path runs/demo/models/sft --output_dir runs/demo/models/judge --max_steps 150
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import trl

from omnidecision.launch import JUDGE_ALIASES, Stage
from omnidecision.preflight import hide_hub_token

logger = logging.getLogger(__name__)


@dataclass
class JudgeScriptArguments(trl.ScriptArguments):
    """The judge's training rows: a harvest's RL states with what followed each recorded decision."""

    dataset_name: str | None = field(default=None, metadata={
        "help": "The harvest's RL dataset folder (DIR/rl): rows with prompt, decision, advanced, correct, category."})
    max_pairs: int | None = field(default=None, metadata={
        "help": "Keep at most this many (positive, negative) pairs after the seeded shuffle; None: all."})

    def __post_init__(self) -> None:
        if hasattr(super(), "__post_init__"):
            super().__post_init__()
        if not self.dataset_name:
            raise ValueError("judge train needs its rows: set dataset_name (a harvest's rl/ folder)")
        if self.max_pairs is not None and self.max_pairs < 1:
            raise ValueError(f"max_pairs must be >= 1 or None, got {self.max_pairs}")


@dataclass
class JudgeRewardConfig(trl.RewardConfig):
    """`trl.RewardConfig` with the judge's CPU defaults (the values of the former Typer flags)."""

    max_steps: int = field(default=300, metadata={"help": "Optimizer steps (pairs per step: "
                                                          "per_device_train_batch_size)."})
    per_device_train_batch_size: int = field(default=16, metadata={"help": "(positive, negative) pairs per step."})
    learning_rate: float = field(default=5e-4, metadata={"help": "AdamW learning rate."})
    lr_scheduler_type: str = field(default="constant", metadata={"help": "Learning-rate schedule."})
    max_length: int | None = field(default=768, metadata={
        "help": "Tokens per (prompt, decision) text; longer ones are truncated (scoring truncates the same way)."})
    logging_steps: float = field(default=25, metadata={"help": "Log every N steps."})
    save_strategy: str = field(default="no", metadata={"help": "Checkpoints while training: no, steps, epoch."})
    report_to: str | list[str] = field(default="none", metadata={"help": "Trackers (none, wandb, ...)."})
    use_cpu: bool = field(default=True, metadata={"help": "Train on the CPU (false: the accelerator the trainer "
                                                          "finds)."})
    bf16: bool | None = field(default=False, metadata={"help": "bfloat16 mixed precision (GPU)."})
    gradient_checkpointing: bool = field(default=False, metadata={
        "help": "Recompute activations in the backward pass (saves memory, costs time)."})
    disable_tqdm: bool | None = field(default=True, metadata={"help": "No progress bar (logs only)."})

    def __post_init__(self) -> None:
        hide_hub_token(self)  # never pickled into training_args.bin, never in the argv wandb records
        if self.max_steps is None or self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 (the judge trains for a fixed number of steps), got "
                             f"{self.max_steps}")
        if self.max_length is not None and self.max_length < 16:
            raise ValueError(f"max_length={self.max_length} cannot hold a digest and a decision")
        super().__post_init__()


@dataclass
class JudgeModelConfig(trl.ModelConfig):
    """The model the judge starts from: the SFT planner (it already reads the digest), with a one-output head."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.model_name_or_path:
            raise ValueError("model_name_or_path is required: the SFT planner the judge starts from")


def make_parser() -> trl.TrlParser:
    return trl.TrlParser((JudgeScriptArguments, JudgeRewardConfig, JudgeModelConfig))


def parse_args(args: list[str] | None = None) -> tuple[JudgeScriptArguments, JudgeRewardConfig, JudgeModelConfig]:
    """Parse `--config RECIPE.yaml` plus overrides (`None`: sys.argv); unknown keys raise a ValueError naming them."""
    return make_parser().parse_args_and_config(args)


# the stage as the launcher takes it (`omnidecision judge train` passes it with `judge_train.main` and `dry_run`)
JUDGE_STAGE = Stage("judge train", "omnidecision.rl.judge_train", parse_args, accelerate=False, aliases=JUDGE_ALIASES,
                    bool_aliases={"--use-cpu": "--use_cpu"})
