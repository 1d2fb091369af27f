"""The trajectory-level GRPO baseline of bench_grpo_signal (bench/trajectory_grpo.py): TRL's group advantages, the
policy-gradient step (direction, zero-advantage runs, per-token normaliser), the batching in-process planner, and
one real training step in the agent loop on a synthetic task."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from bench import trajectory_grpo as tg
from omnidecision.protocol.chat import ChatRequest


def test_group_advantages_equal_trl() -> None:
    from trl.trainer.utils import nanstd

    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    r = torch.tensor(rewards).view(-1, 4)
    expected = ((r - r.mean(dim=1, keepdim=True)) / (nanstd(r, dim=1).unsqueeze(1) + 1e-4)).flatten().tolist()
    assert tg.group_advantages(rewards, 4) == pytest.approx(expected, abs=1e-5)


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    from omnidecision.modeling import load_planner

    return load_planner(tiny_model_dir, trainable=True)


def _batch(tok) -> tuple[tg.Rollouts, list[int], list[int]]:
    prompt = tok("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False).input_ids
    good = tok('{"action": "finish"}', add_special_tokens=False).input_ids + [tok.eos_token_id]
    bad = tok("nonsense", add_special_tokens=False).input_ids + [tok.eos_token_id]
    batch = tg.Rollouts(task_index=[0, 0], rewards=[1.0, 0.0], decisions=[[(prompt, good)], [(prompt, bad)]])
    return batch, prompt, good


def _logp(model, prompt: list[int], completion: list[int]) -> float:
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1]
    return float(torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion).unsqueeze(-1)).sum())


def test_step_raises_the_rewarded_completion(policy) -> None:
    model, tok = policy
    batch, prompt, good = _batch(tok)
    before = _logp(model, prompt, good)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    opt.zero_grad()
    stats = tg.policy_gradient_step(model, batch, tg.group_advantages(batch.rewards, 2), tok.pad_token_id)
    opt.step()
    assert stats["decisions_with_signal"] == 2 and stats["loss"] != 0
    assert _logp(model, prompt, good) > before


def test_zero_advantage_runs_give_no_gradient_but_count_in_the_normaliser(policy) -> None:
    model, tok = policy
    batch, _, _ = _batch(tok)
    model.zero_grad()
    stats = tg.policy_gradient_step(model, batch, [0.0, 0.0], tok.pad_token_id)
    assert stats["decisions_with_signal"] == 0
    assert all(p.grad is None or not p.grad.abs().sum() for p in model.parameters())
    # the same signal with twice the tokens in the batch (a zero-advantage copy) halves the loss (dapo normaliser)
    one = tg.policy_gradient_step(model, batch, [1.0, -1.0], tok.pad_token_id)["loss"]
    doubled = tg.Rollouts(decisions=batch.decisions * 2)
    two = tg.policy_gradient_step(model, doubled, [1.0, -1.0, 0.0, 0.0], tok.pad_token_id)["loss"]
    model.zero_grad()
    assert two == pytest.approx(one / 2, rel=1e-4)


def test_local_planner_batches_concurrent_requests_and_records_per_run(policy) -> None:
    model, tok = policy
    planner = tg.LocalPlanner(model, tok, temperature=1.0, max_new_tokens=6, record=True)
    msgs = [{"role": "system", "content": "plan"}, {"role": "user", "content": "digest"}]

    async def run(n: int) -> list[list]:
        async def one() -> list:
            mine: list = []
            tg._DECISIONS.set(mine)
            await planner.chat(ChatRequest(role="planner", messages=msgs))
            await planner.chat(ChatRequest(role="planner", messages=msgs))
            return mine
        return await asyncio.gather(*(one() for _ in range(n)))

    per_run = asyncio.run(run(3))
    assert planner.batches == 2  # 3 runs x 2 calls: two batched generate calls, not six
    assert [len(r) for r in per_run] == [2, 2, 2]
    for prompt_ids, completion in (d for r in per_run for d in r):
        assert 1 <= len(completion) <= 6 and prompt_ids
        assert all(t != tok.eos_token_id for t in completion[:-1])  # cut at the first end token


@pytest.mark.timeout(300)
def test_one_training_step_in_the_loop(policy, tmp_path) -> None:
    from omnidecision.agent.config import AgentConfig
    from omnidecision.backends.teacher import TeacherBackend
    from omnidecision.rl.config import parse_args
    from omnidecision.tasks.synth import load_suite, write_suite

    model, tok = policy
    write_suite(1, 3, tmp_path / "synth")
    tasks = load_suite(tmp_path / "synth")
    recipe = Path(__file__).resolve().parents[2] / "configs" / "grpo" / "tiny-cpu.yaml"
    _, args, _ = parse_args(["--config", str(recipe), "--model_name_or_path", "m",
                             "--dataset_name", "d", "--output_dir", str(tmp_path / "o"), "--num_generations", "2",
                             "--generation_batch_size", "32", "--max_completion_length", "8"])
    report = tg.train_trajectory_grpo(model, tok, tasks, args, budget_cpu_s=0.001, tasks_per_step=1,
                                      teacher=TeacherBackend(noise=0.0),
                                      agent_config=AgentConfig(step_budget=2), seed=0)
    assert report["steps"] == 1 and report["cpu_s"] > 0
    assert report["decisions"] >= 2  # two runs, at least one planner decision each
    assert report["log"][0]["reward_mean"] in (0.0, 0.5, 1.0)


def test_cpu_tail_average_keeps_the_mean_of_the_tail() -> None:
    layer = torch.nn.Linear(1, 1, bias=False)
    now = {"t": 0.0}
    avg = tg.CpuTailAverage(lambda: now["t"], budget=10.0, start=0.5)
    for step, (t, w) in enumerate([(1.0, 1.0), (4.0, 2.0), (6.0, 3.0), (9.0, 5.0)], start=1):
        now["t"] = t
        with torch.no_grad():
            layer.weight.fill_(w)
        avg.step(layer, step)
    assert avg.apply() == 2  # the snapshots taken from CPU-second 5 on: weights 3 and 5
    assert float(layer.weight) == pytest.approx(4.0)
