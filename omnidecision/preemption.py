"""A checkpoint on SIGTERM, so a preempted or requeued training job costs at most the step in flight.

SLURM preempts (and `scontrol requeue`s) a job by sending SIGTERM to every process of it, then SIGKILL KillWait
seconds later (30 s by default; `scontrol show config | grep KillWait`). Without a handler the trainer dies at once
and the requeued job resumes from its newest periodic checkpoint, redoing every step since. With
`PreemptionCheckpoint` (the stages' `save_on_sigterm`, on by default), the signal only sets a flag; at the end of the
step in flight every process agrees (one all-reduce when distributed: the processes may see the signal at different
steps and must save the same one), the trainer saves a complete checkpoint, and the process exits with 143 (128 +
SIGTERM), so nothing after training (final save, export, a merge job's dependency) mistakes the cut for a finish.
The requeued job resumes from that checkpoint (`resume_from_checkpoint: auto`, omnidecision/checkpoints.py).

Measured on the local two-node cluster (tests/slurm/test_train_slurm.py; docs/cluster/local-cluster.md).

    python -c "from omnidecision.preemption import PreemptionCheckpoint; print(PreemptionCheckpoint.EXIT_CODE)"
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any

from transformers import TrainerCallback

logger = logging.getLogger(__name__)


class PreemptionCheckpoint(TrainerCallback):
    """Save a checkpoint at the end of the step in flight when SIGTERM arrives, then exit with `EXIT_CODE`."""

    EXIT_CODE = 128 + signal.SIGTERM

    def __init__(self) -> None:
        self.requested = False
        self.stopping = False
        self._previous: Any = None

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        # a handler only sets a flag: the trainer is mid-step, and saving from here could write torn tensors
        self.requested = True
        logger.warning("SIGTERM: saving a checkpoint after the step in flight, then exiting %d", self.EXIT_CODE)

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is threading.main_thread():  # signal handlers live in the main thread only
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        return control

    @staticmethod
    def _group(args) -> Any:
        """torch.distributed when this run is one of several processes of an initialised group, else None."""
        if getattr(args, "world_size", 1) <= 1:
            return None
        import torch.distributed as dist

        return dist if dist.is_available() and dist.is_initialized() else None

    def _agreed(self, args) -> bool:
        """Whether any process was signalled (all of them save the same step, or the collectives would hang)."""
        if (dist := self._group(args)) is None:
            return self.requested
        import torch

        flag = torch.tensor([1.0 if self.requested else 0.0], device=args.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def on_step_end(self, args, state, control, **kwargs):
        if self._agreed(args):
            self.stopping = True
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_save(self, args, state, control, **kwargs):
        if self.stopping:
            # every process has written its part of the checkpoint (its RNG state, its shard) before any exits: the
            # first exit ends the job step (`srun --kill-on-bad-exit`, torchrun's agent), killing a process still
            # saving, and the checkpoint it leaves has the main process's trainer_state.json, so it reads complete
            if (dist := self._group(args)) is not None:
                dist.barrier()
            logger.warning("saved checkpoint-%d on SIGTERM; exiting %d for the requeue", state.global_step,
                           self.EXIT_CODE)
            sys.stdout.flush()
            sys.stderr.flush()
            raise SystemExit(self.EXIT_CODE)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self._previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous)
        return control
