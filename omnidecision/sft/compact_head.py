"""Score only the supervised positions in TRL's fused LM head on the CPU.

TRL 1.16's fused LM head (`trl.trainer.utils.add_fused_lm_head`) projects only the positions with a label on
Triton devices and every position elsewhere (to keep tile shapes fixed on compiled backends such as Neuron). With
the assistant-only loss of a planner row (≈ 13 supervised tokens of ≈ 450), scoring every position on the CPU
spends most of the head's time on logits that are thrown away. `enable()` makes the CPU take the compact path;
loss, gradients and the logged metrics are the same (tests/sft/test_compact_head.py), a step is faster
(docs/findings.md). It switches a private TRL name, so `enable()` checks it is there and says so when it is not.

    from omnidecision.sft import compact_head; compact_head.enable()   # sft/train.py, unless compact_lm_head=false
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

_MARK = "_omnidecision_compact_cpu"


def enable(on: bool = True) -> bool:
    """Route CPU tensors through TRL's compact (supervised-positions-only) head path (`on=False`: TRL's own
    choice again). Idempotent; False (with a warning) when this TRL has no such switch, and training goes on
    with TRL's own path."""
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover - TRL is a hard dependency of the SFT stage
        return False
    current: Any = getattr(trl_utils, "_use_triton", None)
    if current is None or not callable(current):
        logger.warning("trl.trainer.utils._use_triton is gone (TRL %s): the fused LM head scores every position "
                       "on the CPU", getattr(__import__("trl"), "__version__", "?"))
        return False
    original = getattr(current, _MARK, None)
    if not on:
        if original is not None:
            trl_utils._use_triton = original
        return True
    if original is not None:
        return True

    def use_compact(device: Any) -> bool:
        return getattr(device, "type", None) == "cpu" or current(device)

    setattr(use_compact, _MARK, current)
    trl_utils._use_triton = use_compact
    return True
