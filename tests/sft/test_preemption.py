"""The SIGTERM checkpoint across processes (omnidecision/preemption.py), in a real two-process gloo group on CPU: one
signalled process makes every process save the same step, and none exits before every one has written its part.

    .venv/bin/pytest -q tests/sft/test_preemption.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp
from transformers import TrainerControl, TrainerState

from omnidecision.preemption import PreemptionCheckpoint
from tests.slurm.conftest import free_port_block

SLOW_SAVE_S = 1.5  # rank 1's part of the checkpoint takes this long; rank 0's is written at once


def _rank(rank: int, port: int, out: str) -> None:
    """One process of the group: rank 0 alone got SIGTERM; both end the step, save their part, reach `on_save`."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    args, state, control = SimpleNamespace(world_size=2, device="cpu"), TrainerState(global_step=7), TrainerControl()
    callback = PreemptionCheckpoint()
    callback.requested = rank == 0  # what `_on_sigterm` sets in the process the signal reached
    callback.on_step_end(args, state, control)
    record: dict = {"save": control.should_save, "stop": control.should_training_stop}
    if control.should_save:  # the trainer's `_save_checkpoint`: this process's part (its RNG state, its shard)
        time.sleep(SLOW_SAVE_S if rank == 1 else 0)
        record["written_at"] = time.time()
        try:
            callback.on_save(args, state, control)
        except SystemExit as stop:
            record["exit"], record["exited_at"] = stop.code, time.time()
    Path(out, f"rank-{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


@pytest.mark.long  # two spawned processes that import torch and transformers: about 30 s on 2 busy cores
def test_one_signalled_process_makes_all_save_and_none_exits_before_all_saved(tmp_path: Path):
    mp.spawn(_rank, args=(free_port_block(1), str(tmp_path)), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert all(r["save"] and r["stop"] and r["exit"] == 143 for r in ranks), ranks  # rank 1 saved unsignalled
    # rank 0 saved at once and still waited for rank 1's part: the first exit ends the job step (srun
    # --kill-on-bad-exit), and a rank killed mid-save would leave a checkpoint that reads complete
    assert ranks[0]["exited_at"] >= ranks[1]["written_at"], ranks


def test_a_single_process_saves_and_exits_without_a_group():
    args, control = SimpleNamespace(world_size=1, device="cpu"), TrainerControl()
    callback = PreemptionCheckpoint()
    callback.on_step_end(args, TrainerState(), control)
    assert not control.should_save and callback.on_save(args, TrainerState(), control) is control  # no signal
    callback.requested = True
    callback.on_step_end(args, TrainerState(global_step=3), control)
    assert control.should_save and control.should_training_stop
    with pytest.raises(SystemExit) as stop:
        callback.on_save(args, TrainerState(global_step=3), control)
    assert stop.value.code == PreemptionCheckpoint.EXIT_CODE == 143
