"""Difficulty-balanced state selection: which states are kept, for any mix of right and wrong start decisions."""

from __future__ import annotations

import random

import pytest

from omnidecision.rl.select import balanced_indices


@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0, 3.0])
def test_every_wrong_state_is_kept_and_right_ones_up_to_the_ratio(ratio):
    rng = random.Random(3)
    scores = [1.0 if rng.random() < 0.7 else rng.choice([0.0, 0.375, 0.5625, 0.8125]) for _ in range(400)]
    kept, stats = balanced_indices(scores, right_ratio=ratio, seed=0)
    wrong = {i for i, s in enumerate(scores) if s < 1.0}
    assert wrong <= set(kept) and len(set(kept)) == len(kept) == stats["kept"]
    assert stats["kept_right"] == min(400 - len(wrong), round(ratio * len(wrong)))
    assert sum(scores[i] == 1.0 for i in kept) == stats["kept_right"]
    assert kept == sorted(kept)
    # seeded: the same draw again, a different one with another seed (when there is a choice)
    assert balanced_indices(scores, right_ratio=ratio, seed=0)[0] == kept
    if 0 < stats["kept_right"] < stats["right"]:
        assert balanced_indices(scores, right_ratio=ratio, seed=1)[0] != kept


def test_no_wrong_state_keeps_everything_and_bad_ratio_is_an_error():
    kept, stats = balanced_indices([1.0] * 5, right_ratio=1.0, seed=0)
    assert kept == [0, 1, 2, 3, 4] and stats["wrong"] == 0
    kept, _ = balanced_indices([0.5] * 3, right_ratio=1.0, seed=0)
    assert kept == [0, 1, 2]
    with pytest.raises(ValueError, match="right_ratio"):
        balanced_indices([1.0], right_ratio=-0.5, seed=0)
