"""Tail weight averaging: the running mean is the mean of the snapshots, only trainable weights are touched, it
survives a resume, bad settings are refused (the real GRPO run: tests/rl/test_grpo_smoke.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from omnidecision.rl.averaging import STATE_FILE, TailWeightAverage, check_supported, start_step


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    model[1].weight.requires_grad_(False)  # frozen, like a LoRA base weight
    return model


def _run(avg, model, steps, max_steps, out=None):
    state = SimpleNamespace(global_step=0, max_steps=max_steps, is_world_process_zero=True)
    avg.on_train_begin(None, state, None)
    seen = []
    for step in steps:
        with torch.no_grad():
            model[0].weight.add_(float(step))  # a known trajectory
        state.global_step = step
        avg.on_step_end(None, state, None)
        if step >= avg.start_step:
            seen.append(model[0].weight.detach().clone())
        if out is not None:
            (out / f"checkpoint-{step}").mkdir(parents=True, exist_ok=True)
            avg.on_save(SimpleNamespace(output_dir=str(out)), state, None)
    return seen


def test_mean_of_the_tail_snapshots_and_frozen_weights_untouched():
    model = _model()
    frozen = model[1].weight.detach().clone()
    avg = TailWeightAverage(model, start=0.5, every=1)
    seen = _run(avg, model, range(1, 11), max_steps=10)
    assert avg.start_step == 5 and len(seen) == 6
    assert avg.apply() == 6
    assert torch.allclose(model[0].weight, torch.stack(seen).mean(0), atol=1e-6)
    assert torch.equal(model[1].weight, frozen)
    assert avg.apply() == 0  # applied once


def test_every_n_steps_and_resume_from_a_checkpoint(tmp_path):
    model = _model()
    avg = TailWeightAverage(model, start=0.0, every=2)
    seen = _run(avg, model, range(1, 6), max_steps=8, out=tmp_path)  # snapshots at steps 1, 3, 5
    assert (tmp_path / "checkpoint-5" / STATE_FILE).exists()
    resumed = TailWeightAverage(model, start=0.0, every=2, resume_from=tmp_path / "checkpoint-5")
    assert resumed.count == 3
    more = _run(resumed, model, range(6, 9), max_steps=8)  # step 7
    resumed.apply()
    kept = [w for w, step in zip(seen, range(1, 6), strict=True) if (step - 1) % 2 == 0]
    kept += [w for w, step in zip(more, range(6, 9), strict=True) if (step - 1) % 2 == 0]
    assert len(kept) == 4
    assert torch.allclose(model[0].weight, torch.stack(kept).mean(0), atol=1e-5)


def test_bad_settings_and_sharded_parameters_are_refused(monkeypatch):
    with pytest.raises(ValueError, match="start in"):
        TailWeightAverage(_model(), start=1.0)
    with pytest.raises(ValueError, match="weight_average_start"):
        start_step(10, -0.1)
    check_supported(SimpleNamespace(fsdp=None))
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    with pytest.raises(ValueError, match="ZeRO-3"):
        check_supported(SimpleNamespace(fsdp=None))
