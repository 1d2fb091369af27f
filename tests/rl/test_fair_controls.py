"""The rft control and GRPO see the same states: for one recipe and seed, the state ids GRPO's trainer scored
(states_seen.json) are the ones rft-select samples on, in order, across an epoch boundary; GRPO records what it
consumed and the checkpoint it chose among candidates that include its start.

    pytest -q tests/rl/test_fair_controls.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("trl")

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "grpo" / "tiny-cpu.yaml"


def _args(model: Path, data: Path, out: Path, *extra: str):
    from omnidecision.launch import parse_stage_args, stage_args
    from omnidecision.rl.config import GRPO_STAGE

    # 4 training states, 2 per generation: the 3 steps cross an epoch (the sampler draws a fresh permutation)
    overrides = ["--model_name_or_path", str(model), "--dataset_name", str(data), "--output_dir", str(out),
                 "--max_steps", "3", "--num_generations", "4", "--per_device_train_batch_size", "8",
                 "--generation_batch_size", "8", "--max_completion_length", "16", "--eval_closure_n", "4",
                 "--max_train_samples", "4", "--checkpoint_every", "2", "--checkpoint_dev_n", "4",
                 "--logging_steps", "1", "--seed", "5", *extra]
    return parse_stage_args(GRPO_STAGE, stage_args(GRPO_STAGE, RECIPE, overrides))


def test_rft_select_samples_on_the_states_grpo_trains_on(tiny_planner, rl_dir, tmp_path):
    from omnidecision.rl.rft import rft_states
    from omnidecision.rl.train import load_policy, main

    out = tmp_path / "grpo"
    main(*_args(tiny_planner, rl_dir, out))
    seen = json.loads((out / "states_seen.json").read_text())
    assert len(seen) == 3 * 2  # 3 steps x 2 prompts per generation

    script, training, model_args = _args(tiny_planner, rl_dir, tmp_path / "unused")
    planner, tok, _ = load_policy(model_args)
    rows, selection = rft_states(script, training, planner, tok)
    from omnidecision.rl.states import state_id

    assert [state_id(r) for r in rows] == seen
    assert selection["mode"] == "balanced"  # the recipe's selection, applied by both
    # another seed: another order (the seed reaches the sampler of both)
    script, training, _ = _args(tiny_planner, rl_dir, tmp_path / "unused", "--seed", "6")
    assert [state_id(r) for r in rft_states(script, training, planner, tok)[0]] != seen

    # what GRPO consumed: steps, completions = states x K, threads, seed
    consumed = json.loads((out / "consumed.json").read_text())
    assert consumed["optimizer_steps"] == 3 and consumed["completions_sampled"] == 6 * 4
    assert consumed["rows"] == 3 * 8 and consumed["seed"] == 5 and consumed["threads"] >= 1
    assert consumed["tokens"] and consumed["tokens"] > 0
    # the checkpoint policy: the start, step 2 and the final (averaged) weights; the best of them saved
    chosen = json.loads((out / "checkpoint_selection.json").read_text())
    assert chosen["policy"] == "dev_closure" and [c["step"] for c in chosen["candidates"]] == [0, 2, 3]
    best = max(c["dev_closure"] for c in chosen["candidates"])
    assert chosen["chosen_dev_closure"] == best >= chosen["candidates"][0]["dev_closure"]
    report = json.loads((out / "closure_eval.json").read_text())
    assert report["checkpoint_selection"]["chosen_step"] == chosen["chosen_step"]
