"""Checkpoint and output helpers shared by the SFT and GRPO stages (resume after a kill; the files the Hugging Face
tools read).

    python -c "from omnidecision.checkpoints import resolve_resume; print(resolve_resume('true', 'runs/sft'))"
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


# The trainer writes this file after the weights, optimiser and RNG state: a folder without it is torn (the process
# was killed while saving) and must not be resumed from.
COMPLETE_MARKER = "trainer_state.json"


def last_complete_checkpoint(output_dir: str) -> str | None:
    """The newest `checkpoint-N` folder in `output_dir` that was written to the end (skipping torn ones)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    if not os.path.isdir(output_dir):
        return None
    steps = sorted((int(name.rsplit("-", 1)[1]), name) for name in os.listdir(output_dir)
                   if name.startswith(PREFIX_CHECKPOINT_DIR + "-") and name.rsplit("-", 1)[1].isdigit())
    for _, name in reversed(steps):
        path = os.path.join(output_dir, name)
        if os.path.isfile(os.path.join(path, COMPLETE_MARKER)):
            return path
        logger.warning("skipping %s: no %s (torn by a kill while saving)", path, COMPLETE_MARKER)
    return None


# The default of `resume_from_checkpoint` in the SFT and GRPO recipes: a restarted command continues its run.
RESUME_DEFAULT = "auto"
RESUME_HELP = ("Where training starts. auto (default): from the newest complete checkpoint in output_dir when there "
               "is one (a restart of the same command continues; a checkpoint torn by a kill while saving is "
               "skipped), else from scratch. true: the same, warning when there is none. A checkpoint folder: from "
               "it. false: from scratch even when output_dir holds checkpoints.")


def _checkpoints(output_dir: str) -> list[str]:
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    if not os.path.isdir(output_dir):
        return []
    return sorted(n for n in os.listdir(output_dir) if n.startswith(PREFIX_CHECKPOINT_DIR + "-"))


def resolve_resume(value: str | bool | None, output_dir: str) -> str | None:
    """`auto` (the recipes' default) → the newest complete checkpoint in `output_dir`, or None (a fresh start) when
    there is none; `true` → the same, with a warning when there is none; a path → itself; false/none → None (a
    warning when `output_dir` holds checkpoints: the new run's rotation may delete them). A named folder that does
    not exist is an error (a typo must not restart from scratch). The one resume rule of `omnidecision sft|grpo`
    and the SLURM scripts.

    >>> resolve_resume("auto", "/nonexistent") is None and resolve_resume("false", "/nonexistent") is None
    True
    """
    if value is None or value is False or str(value).lower() in ("false", "no", "none", ""):
        if old := _checkpoints(output_dir):
            logger.warning("starting from scratch (resume_from_checkpoint=false) in %s, which holds %s: the new "
                           "run's checkpoints replace them", output_dir, ", ".join(old))
        return None
    if str(value).lower() == RESUME_DEFAULT:
        last = last_complete_checkpoint(output_dir)
        logger.info("resuming from %s" if last else "no checkpoint in %s: starting from scratch",
                    last or output_dir)
        return last
    if value is True or str(value).lower() in ("true", "yes", "last"):
        last = last_complete_checkpoint(output_dir)
        if last is None:
            logger.warning("resume requested but no complete checkpoint in %s: starting from scratch", output_dir)
        return last
    if not os.path.isdir(str(value)):
        raise FileNotFoundError(f"resume_from_checkpoint: no checkpoint folder at {value}")
    return str(value)


def save_ecosystem_outputs(trainer: Any, metrics: dict[str, dict[str, Any]], dataset: str | None,
                           tags: list[str]) -> None:
    """What Hugging Face tools read in `output_dir`, written by the trainer itself (on the main process only):
    `<split>_results.json` + `all_results.json` per non-empty split, `trainer_state.json`, the model card README.md.
    Both training entries call it. A local dataset folder is left out of the card (it would become a Hub link)."""
    for split, values in metrics.items():
        if values:
            trainer.save_metrics(split, values)
    trainer.save_state()
    hub_dataset = None if dataset is None or Path(dataset).exists() else dataset
    trainer.create_model_card(model_name=Path(trainer.args.output_dir).name, dataset_name=hub_dataset, tags=tags)
