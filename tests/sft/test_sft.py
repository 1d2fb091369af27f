"""State-SFT on the tiny planner: loss falls, LoRA leaves the base untouched, resume continues the same run,
and an export (merged or adapter) reproduces the trained model.

    .venv/bin/pytest tests/sft -q
"""

from __future__ import annotations

import json
import shutil

import pytest

from .conftest import sft_args

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _losses(out_dir) -> dict[int, float]:
    history = json.loads((out_dir / "log_history.json").read_text())
    return {h["step"]: h["loss"] for h in history if "loss" in h}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, tiny_model, sft_data):
    from omnidecision.sft.train import main

    out = tmp_path_factory.mktemp("full") / "out"
    run = main(*sft_args(tiny_model, sft_data, out, "--max_steps", "12", "--save_strategy", "steps",
                         "--save_steps", "6"))
    return out, run


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory, tiny_model, sft_data):
    from omnidecision.sft.train import main

    out = tmp_path_factory.mktemp("lora") / "out"
    run = main(*sft_args(tiny_model, sft_data, out, "--max_steps", "4", "--use_peft", "true", "--lora_r", "4",
                         "--lora_alpha", "8", "--lora_dropout", "0.0", "--lora_target_modules", "all-linear",
                         "--learning_rate", "1e-2"))
    return out, run


def test_training_loss_decreases(full_run):
    out, run = full_run
    losses = _losses(out)
    assert sorted(losses) == list(range(1, 13))
    first, last = [losses[s] for s in (1, 2, 3)], [losses[s] for s in (10, 11, 12)]
    assert sum(last) / 3 < 0.85 * sum(first) / 3, losses
    assert run["global_step"] == 12
    card = json.loads((out / "sft_run.json").read_text())
    assert card["data"]["train"]["rows"] == 96
    assert card["recipe"]["training"]["assistant_only_loss"] is True
    assert (out / "config.json").exists() and (out / "chat_template.jinja").exists()
    # what the Hugging Face tools read, written by the trainer itself
    assert json.loads((out / "train_results.json").read_text())["train_loss"] > 0
    assert "train_loss" in json.loads((out / "all_results.json").read_text())
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 12
    assert "SFT" in (out / "README.md").read_text()


def test_resume_continues_the_same_run(full_run, tmp_path, tiny_model, sft_data):
    from omnidecision.sft.train import main

    out, _ = full_run
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(out / "checkpoint-6", resumed / "checkpoint-6")
    run = main(*sft_args(tiny_model, sft_data, resumed, "--max_steps", "12", "--save_strategy", "steps",
                         "--save_steps", "6", "--resume_from_checkpoint", "true"))
    assert run["resumed_from"].endswith("checkpoint-6")
    assert run["global_step"] == 12
    original, again = _losses(out), _losses(resumed)
    assert sorted(again) == list(range(1, 13))  # one log history: steps 1-6 from the checkpoint, then 7-12
    for step in range(1, 13):  # same data order, optimizer and RNG state: the same losses
        assert again[step] == pytest.approx(original[step], abs=1e-3), (step, again, original)


def test_resume_from_missing_path_is_a_clear_error(tmp_path):
    from omnidecision.checkpoints import resolve_resume

    with pytest.raises(FileNotFoundError, match="no checkpoint folder"):
        resolve_resume(str(tmp_path / "nope"), str(tmp_path))
    assert resolve_resume("true", str(tmp_path / "empty")) is None
    assert resolve_resume(None, str(tmp_path)) is None


def test_resume_skips_a_checkpoint_torn_by_a_kill(tmp_path):
    from omnidecision.checkpoints import resolve_resume

    for step, complete in ((2, True), (10, True), (12, False), (4, True)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"")
        if complete:
            (folder / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-x").mkdir()  # not a step folder
    assert resolve_resume("true", str(tmp_path)) == str(tmp_path / "checkpoint-10")  # numeric order, 12 torn
    (tmp_path / "checkpoint-12" / "trainer_state.json").write_text("{}")
    assert resolve_resume(True, str(tmp_path)) == str(tmp_path / "checkpoint-12")


def test_lora_changes_only_the_adapter(lora_run, tiny_model):
    from peft import PeftModel
    from safetensors.torch import load_file

    out, run = lora_run
    assert (out / "adapter_config.json").exists() and not (out / "model.safetensors").exists()
    original = load_file(tiny_model / "model.safetensors")
    model = PeftModel.from_pretrained(transformers.AutoModelForCausalLM.from_pretrained(tiny_model), out)
    base = model.get_base_model().state_dict()
    n_base = 0
    for name, tensor in original.items():
        key = name.replace("proj.weight", "proj.base_layer.weight")
        key = key if key in base else name
        assert torch.equal(base[key], tensor), name
        n_base += 1
    assert n_base == len(original)
    lora_b = {k: v for k, v in model.state_dict().items() if "lora_B" in k}
    assert lora_b and all(v.abs().sum() > 0 for v in lora_b.values())  # lora_B starts at zero: it moved


def test_export_merged_gives_the_adapter_logits(lora_run, tiny_model, tmp_path):
    from peft import PeftModel

    from omnidecision.export import export

    out, _ = lora_run
    merged = export(out, tmp_path / "merged", merge=True)
    m = transformers.AutoModelForCausalLM.from_pretrained(merged)
    assert m.config.use_cache is True
    assert not any("lora" in k for k in m.state_dict())
    ref = PeftModel.from_pretrained(transformers.AutoModelForCausalLM.from_pretrained(tiny_model), out).eval()
    tok = transformers.AutoTokenizer.from_pretrained(merged)
    ids = torch.tensor([tok("QUESTION: who built the bridge?\n[0] status=actionable")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(m.eval()(ids).logits, ref(ids).logits, atol=1e-4, rtol=0)
    assert tok.chat_template and "generation" in tok.chat_template
    prov = json.loads((merged / "provenance.json").read_text())
    assert prov["mode"] == "merged" and prov["base_model"] == str(tiny_model)
    assert prov["final_metrics"]["train_loss"] > 0 and prov["data"]["train"]["rows"] == 96
    assert "Final metrics" in (merged / "PROVENANCE.md").read_text()


def test_export_keeps_the_adapter(lora_run, tmp_path):
    from omnidecision.export import export

    out, _ = lora_run
    kept = export(out, tmp_path / "adapter", merge=False)
    assert (kept / "adapter_config.json").exists() and (kept / "adapter_model.safetensors").exists()
    assert not (kept / "model.safetensors").exists()
    assert (kept / "tokenizer.json").exists()
    assert json.loads((kept / "provenance.json").read_text())["mode"] == "adapter"


def test_export_full_restores_use_cache(full_run, tmp_path):
    from omnidecision.export import export

    out, _ = full_run
    cfg = json.loads((out / "config.json").read_text())
    cfg["use_cache"] = False  # what a trainer may leave behind
    (out / "config.json").write_text(json.dumps(cfg))
    dst = export(out, tmp_path / "full")
    assert json.loads((dst / "config.json").read_text())["use_cache"] is True
    a = transformers.AutoModelForCausalLM.from_pretrained(out)
    b = transformers.AutoModelForCausalLM.from_pretrained(dst)
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())
    from omnidecision.preflight import PreflightError

    with pytest.raises(PreflightError, match="missing: no such folder"):
        export(tmp_path / "missing", tmp_path / "x")
    assert not (tmp_path / "x").exists()
