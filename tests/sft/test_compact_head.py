"""`modeling.compact_lm_head`: on the CPU, TRL's fused LM head scored on the supervised positions only gives the
same loss, gradients and token metrics as TRL's every-position path (the speed: bench/results/sft_head.json)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
trl_utils = pytest.importorskip("trl.trainer.utils")


def _loss_and_grads(model, batch):
    model.zero_grad()
    out = model(**batch, fused_lm_head=True)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


def test_compact_cpu_path_matches_the_every_position_path(tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM

    from omnidecision.modeling import compact_lm_head

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (3, 40), generator=g)
    labels = torch.full_like(ids, -100)
    labels[:, 30:38] = ids[:, 30:38]  # a few supervised positions per row, like an assistant-only row
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}

    compact_lm_head(False)  # an SFT run earlier in this process may have switched it on
    original = trl_utils._use_triton
    assert original(torch.device("cpu")) is False  # TRL's own choice on the CPU: every position
    full, full_grads = _loss_and_grads(model, batch)
    monkeypatch.setattr(trl_utils, "_use_triton", original)  # restored after the test
    assert compact_lm_head() and compact_lm_head()  # idempotent
    assert trl_utils._use_triton(torch.device("cpu")) is True
    compact, compact_grads = _loss_and_grads(model, batch)
    assert compact_lm_head(False) and trl_utils._use_triton is original  # switched back: TRL's own again

    torch.testing.assert_close(compact.loss, full.loss)
    for name in ("log_probs", "entropy", "is_top1"):
        torch.testing.assert_close(getattr(compact, name).float(), getattr(full, name).float())
    assert compact_grads.keys() == full_grads.keys() and full_grads
    for name, grad in full_grads.items():
        torch.testing.assert_close(compact_grads[name], grad, rtol=1e-4, atol=1e-6)


def test_enable_says_so_when_the_private_switch_is_gone(monkeypatch, caplog):
    from omnidecision.modeling import compact_lm_head

    monkeypatch.delattr(trl_utils, "_use_triton")
    assert compact_lm_head() is False
    assert "_use_triton is gone" in caplog.text
