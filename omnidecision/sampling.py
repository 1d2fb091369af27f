"""Training data order that a resume reproduces: the length-grouped sampler seeded by (seed, epoch).

transformers' `LengthGroupedSampler` (`train_sampling_strategy: group_by_length`, the CPU recipes' choice) draws
each epoch's order from the global torch RNG. A run resumed inside its second or later epoch draws that epoch's order
from the RNG as it stands at the restart, not as it stood when the uninterrupted run drew it: from the first step
after the checkpoint the batches differ, and so do the final weights (measured: tests/slurm/test_train_slurm.py, a
requeue at step 51 of 120 with 50 steps an epoch). accelerate already seeds the plain random sampler per epoch
(`use_seedable_sampler`); `EpochSeededLengthGroupedSampler` does the same for the length-grouped one, so the order
of epoch e is a function of (seed, e) alone, whatever happened before.

    python -c "from omnidecision.sampling import EpochSeededLengthGroupedSampler as S; \
s = S(2, lengths=[3, 1, 2, 5], seed=0); s.set_epoch(1); print(list(s))"
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.trainer_pt_utils import LengthGroupedSampler, get_length_grouped_indices


class EpochSeededLengthGroupedSampler(LengthGroupedSampler):
    """`LengthGroupedSampler` whose order in epoch e comes from a generator seeded with seed + e.

    >>> s = EpochSeededLengthGroupedSampler(2, lengths=[3, 1, 2, 5, 4, 6], seed=0)
    >>> s.set_epoch(1); first = list(s); _ = torch.rand(3); s.set_epoch(1)
    >>> list(s) == first  # the global RNG's state does not matter
    True
    """

    def __init__(self, batch_size: int, dataset: Any = None, lengths: list[int] | None = None,
                 model_input_name: str | None = None, *, seed: int = 0) -> None:
        super().__init__(batch_size, dataset=dataset, lengths=lengths, model_input_name=model_input_name)
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(get_length_grouped_indices(self.lengths, self.batch_size, generator=generator))


def seed_length_grouped_sampler(trainer: Any) -> None:
    """Make `trainer` (a transformers/TRL Trainer) build its length-grouped sampler seeded by (seed, epoch). Other
    strategies are left as they are (accelerate seeds the random sampler; GRPO's sampler is seeded by TRL)."""
    build = trainer._get_train_sampler

    def _get_train_sampler(train_dataset: Any = None) -> Any:
        sampler = build(train_dataset)
        if type(sampler) is LengthGroupedSampler:
            return EpochSeededLengthGroupedSampler(sampler.batch_size, lengths=sampler.lengths,
                                                   seed=trainer.args.data_seed or trainer.args.seed)
        return sampler

    trainer._get_train_sampler = _get_train_sampler
