"""Configs of the state-SFT stage: TRL's dataclasses with this project's defaults, parsed by `TrlParser`.

A YAML recipe sets any field of the three dataclasses (unknown keys are an error); CLI flags override it:

    omnidecision sft --config configs/sft/tiny-cpu.yaml --learning_rate 1e-3 --max_steps 50
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import trl

from omnidecision.checkpoints import RESUME_DEFAULT, RESUME_HELP, SAVE_ON_SIGTERM_HELP, CheckpointPolicyArguments
from omnidecision.launch import Stage
from omnidecision.preflight import check_precision, hide_hub_token

logger = logging.getLogger(__name__)


@dataclass
class SFTScriptArguments(trl.ScriptArguments, CheckpointPolicyArguments):
    """Where the data comes from (a harvested `DIR/sft` folder), how much of it to use, and which weights are kept
    (`checkpoint_policy`: omnidecision.checkpoints)."""

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
    early_stopping_patience: int | None = field(
        default=None, metadata={"help": "Stop once this many dev evaluations in a row bring no better "
                                        "`metric_for_best_model` (needs load_best_model_at_end: the best is kept). "
                                        "With an epoch budget (`max_steps -1`, `num_train_epochs`) SFT trains as long "
                                        "as its data keeps helping. 0 or None: the whole budget (0 turns off a "
                                        "recipe's patience from the command line)."})
    early_stopping_threshold: float = field(
        default=0.0, metadata={"help": "How much better the metric must get to count as better (early stopping)."})
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
        if self.early_stopping_patience is not None and self.early_stopping_patience < 0:
            raise ValueError(f"early_stopping_patience must be >= 0 or None, got {self.early_stopping_patience}")
        if self.early_stopping_patience == 0:  # the command line cannot say None: 0 is "no early stopping"
            self.early_stopping_patience = None
        if self.max_train_seconds is not None and self.max_train_seconds <= 0:
            raise ValueError(f"max_train_seconds must be > 0 or None, got {self.max_train_seconds}")
        self.check_policy()

    def dev_data(self) -> str:
        """The RL states whose dev split scores the `dev_closure` candidates: `checkpoint_dev_data`; else, for a
        dataset written by rft-select, the RL states it sampled from (its rft_select.json); else the rl/ folder
        beside `dataset_name` (a harvest folder holds sft/ and rl/ side by side)."""
        if self.checkpoint_dev_data:
            return self.checkpoint_dev_data
        data = Path(self.dataset_name or "")
        if (data / "rft_select.json").is_file():
            return json.loads((data / "rft_select.json").read_text("utf-8"))["data"]
        if (data.parent / "rl").is_dir():
            return str(data.parent / "rl")
        raise ValueError(f"checkpoint_policy=dev_closure: no dev states for {self.dataset_name} (no rl/ beside it, "
                         "no rft_select.json in it): set checkpoint_dev_data to a harvest's rl/ folder")


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
    save_on_sigterm: bool = field(default=True, metadata={"help": SAVE_ON_SIGTERM_HELP})
    cpu_fallback: bool = field(
        default=False,
        metadata={"help": "A bf16/fp16 recipe on a machine with no visible CUDA device: train on the CPU in float32 "
                          "(with a warning) instead of stopping with an error. Off by default: on a GPU node whose "
                          "GPUs are invisible the run must stop, not crawl on the CPU."},
    )

    def __post_init__(self) -> None:
        check_precision(self, "SFT recipe")
        hide_hub_token(self)  # never pickled into training_args.bin, never in the argv wandb records
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
    if script_args.checkpoint_policy == "dev_closure" and training_args.load_best_model_at_end:
        raise ValueError("checkpoint_policy=dev_closure chooses the saved weights itself: set "
                         "load_best_model_at_end false (one selection policy per run)")
    if script_args.early_stopping_patience is not None and not training_args.load_best_model_at_end:
        # transformers' EarlyStoppingCallback reads the best metric that load_best_model_at_end tracks
        raise ValueError(f"early_stopping_patience={script_args.early_stopping_patience} needs "
                         "load_best_model_at_end true and a dev split evaluated (eval_strategy steps or epoch)")
    return script_args, training_args, model_args


# the stage as the launcher takes it (`omnidecision sft` passes it with `train.main` and `dryrun.dry_run`)
SFT_STAGE = Stage("sft", "omnidecision.sft.train", parse_args)
