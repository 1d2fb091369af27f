"""Checkpoint helpers shared by the SFT and GRPO stages (resume after a kill).

    python -c "from omnidecision.checkpoints import resolve_resume; print(resolve_resume('true', 'runs/sft'))"
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)


def resolve_resume(value: str | bool | None, output_dir: str) -> str | None:
    """`true` → the last checkpoint in `output_dir` (None, with a warning, when there is none); a path → itself;
    false/none → None. A named folder that does not exist is an error (a typo must not restart from scratch)."""
    from transformers.trainer_utils import get_last_checkpoint

    if value is None or value is False or str(value).lower() in ("false", "no", "none", ""):
        return None
    if value is True or str(value).lower() in ("true", "yes", "last"):
        last = get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
        if last is None:
            logger.warning("resume requested but no checkpoint in %s: starting from scratch", output_dir)
        return last
    if not os.path.isdir(str(value)):
        raise FileNotFoundError(f"resume_from_checkpoint: no checkpoint folder at {value}")
    return str(value)
