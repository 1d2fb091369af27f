"""The `sft_plus` control (configs/sft/tiny-cpu-continue.yaml): its schedule continues SFT (a warm-up to a rate below
SFT's peak, a cosine decay to a floor), and its start is among its checkpoint candidates, so checkpoint choice alone
never puts it below its start: with a learning rate that wrecks the planner, the saved weights still score what the
best candidate scored. It records what it consumed.

    pytest -q tests/sft/test_sft_plus.py
"""

from __future__ import annotations

import json

import pytest

from tests.sft.conftest import ROOT

CONTINUE = ROOT / "configs" / "sft" / "tiny-cpu-continue.yaml"


def _parse(*extra: str):
    from omnidecision.sft.config import parse_args

    return parse_args(["--config", str(CONTINUE), *extra])


def test_the_schedule_continues_sft_instead_of_restarting_it():
    import torch
    from transformers import get_scheduler

    _, training, _ = _parse()
    _, sft, _ = (__import__("omnidecision.sft.config", fromlist=["parse_args"]).parse_args(
        ["--config", str(ROOT / "configs" / "sft" / "tiny-cpu.yaml")]))
    steps = training.max_steps
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=training.learning_rate)
    sched = get_scheduler(training.lr_scheduler_type, opt, num_warmup_steps=training.get_warmup_steps(steps),
                          num_training_steps=steps, scheduler_specific_kwargs=training.lr_scheduler_kwargs)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    peak = max(lrs)
    assert lrs[0] < 0.1 * peak  # a warm-up: Adam's moments start empty
    assert peak == pytest.approx(training.learning_rate) and peak <= sft.learning_rate / 5  # not a restart
    assert lrs.index(peak) < steps // 4  # warm-up short, then decay
    assert all(b <= a + 1e-12 for a, b in zip(lrs[lrs.index(peak):], lrs[lrs.index(peak) + 1:], strict=False))
    assert lrs[-1] == pytest.approx(0.1 * peak, rel=0.05)  # decays to a floor, not to zero
    # the recipe's checkpoint policy: the one every post-SFT arm uses
    script, training, _ = _parse()
    assert script.checkpoint_policy == "dev_closure" and not training.load_best_model_at_end
    with pytest.raises(ValueError, match="load_best_model_at_end"):
        _parse("--load_best_model_at_end", "true", "--eval_strategy", "steps", "--metric_for_best_model", "eval_loss")


def test_checkpoint_choice_never_puts_sft_plus_below_its_start(tiny_model, sft_data, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from omnidecision.rl.data import write_rl_dataset
    from omnidecision.rl.evaluate import dev_closure_scorer
    from omnidecision.sft.train import main

    rl = write_rl_dataset(tmp_path / "harvest", n_train=24, n_validation=8, seed=3) / "rl"
    out = tmp_path / "sft-plus"
    # a learning rate that wrecks the planner: training can only lose dev score
    script, training, model = _parse("--model_name_or_path", str(tiny_model), "--dataset_name", str(sft_data),
                                     "--output_dir", str(out), "--max_steps", "4", "--checkpoint_every", "2",
                                     "--checkpoint_dev_data", str(rl), "--checkpoint_dev_n", "8",
                                     "--learning_rate", "5.0", "--warmup_steps", "0",
                                     "--per_device_train_batch_size", "4", "--max_length", "768",
                                     "--save_strategy", "no", "--disable_tqdm", "true")
    main(script, training, model)
    chosen = json.loads((out / "checkpoint_selection.json").read_text())
    steps = [c["step"] for c in chosen["candidates"]]
    assert chosen["policy"] == "dev_closure" and steps == [0, 2, 4]
    start = chosen["candidates"][0]["dev_closure"]
    assert chosen["chosen_dev_closure"] == max(c["dev_closure"] for c in chosen["candidates"]) >= start
    assert chosen["dev_data"] == str(rl)

    # the saved weights are the chosen candidate's: they score what it scored, and step 0 means the start itself
    tok = AutoTokenizer.from_pretrained(str(out))
    saved = AutoModelForCausalLM.from_pretrained(str(out))
    scorer = dev_closure_scorer(script, str(rl), tok, {"enable_thinking": False})
    assert scorer(saved) == pytest.approx(chosen["chosen_dev_closure"], abs=1e-6)
    if chosen["chosen_step"] == 0:
        original = AutoModelForCausalLM.from_pretrained(str(tiny_model))
        for (name, a), (_, b) in zip(saved.state_dict().items(), original.state_dict().items(), strict=True):
            assert torch.equal(a, b), name

    consumed = json.loads((out / "consumed.json").read_text())
    assert consumed["optimizer_steps"] == 4 and consumed["rows"] == 4 * 4 and consumed["effective_batch"] == 4
    assert consumed["threads"] == torch.get_num_threads() and consumed["seed"] == 0
    assert consumed["tokens"] and consumed["tokens"] > 0
