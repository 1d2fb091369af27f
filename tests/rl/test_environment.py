"""The ledger agent as a TRL environment (omnidecision/rollout/environment.py): the tool-call format round-trips the
planner's action JSON, an episode driven by hand runs the real agent to a judged answer, and TRL's GRPOTrainer
trains the environment for two steps from a tiny SFT planner, with rewards that are the environment's judged runs
and weights that move."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("trl")

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "grpo" / "tiny-cpu-env.yaml"


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("env-tasks") / "tasks"
    subprocess.run([sys.executable, "-m", "omnidecision.cli", "tasks", "synth", "--n", "12", "--seed", "100",
                    "--out", str(out)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return out


@pytest.fixture(scope="module")
def sft_start(tasks_dir, tmp_path_factory) -> Path:
    """A tiny planner SFT-trained on the noisy teacher's harvested runs of the same tasks (enough steps to write
    valid actions most of the time; the environment's rewards then vary within a group)."""
    import asyncio

    from omnidecision.agent.config import AgentConfig
    from omnidecision.backends.factory import build_backends
    from omnidecision.collect.harvest import HarvestOptions, run_harvest
    from omnidecision.protocol.chat import BackendSpec
    from omnidecision.rollout.options import RolloutOptions
    from omnidecision.rollout.runner import run_tasks
    from omnidecision.sft.config import parse_args as sft_args
    from omnidecision.sft.train import main as sft_main
    from omnidecision.synthetic.tiny import build_tiny_planner, harvest_texts
    from omnidecision.tasks.loaders import load_tasks

    work = tmp_path_factory.mktemp("env-sft")
    backends = build_backends({"default": BackendSpec(kind="teacher", options={"noise": 0.25, "seed": 0})})
    asyncio.run(run_tasks(load_tasks(tasks_dir, "synthetic"), AgentConfig(digest_max_chars=1000), backends,
                             RolloutOptions(out_file=work / "runs" / "trajectories.jsonl", samples=2, concurrency=8,
                                            progress=False)))
    run_harvest([str(work / "runs")], work / "data", HarvestOptions(advancing_only=True, dedup=True,
                                                                    val_fraction=0.0, digest_max_chars=1000))
    untrained = build_tiny_planner(work / "untrained", texts=harvest_texts(work / "data" / "sft"), heads=2)
    sft_main(*sft_args(["--config", str(ROOT / "configs/sft/tiny-cpu.yaml"), "--model_name_or_path", str(untrained),
                        "--dataset_name", str(work / "data" / "sft"), "--output_dir", str(work / "sft"),
                        "--max_steps", "120", "--eval_strategy", "no", "--save_strategy", "no",
                        "--logging_steps", "50"]))
    return work / "sft"


def test_the_action_json_is_the_tool_call(tiny_planner):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import is_chat_template_prefix_preserving, parse_response, supports_tool_calling

    from omnidecision.rollout.environment import LedgerEnvironment, use_action_tool_format

    tok = use_action_tool_format(AutoTokenizer.from_pretrained(tiny_planner))
    assert supports_tool_calling(tok) and is_chat_template_prefix_preserving(tok)
    env = LedgerEnvironment()
    prefix = tok.apply_chat_template([{"role": "user", "content": "digest"}], tokenize=True,
                                     add_generation_prompt=True, return_dict=False)

    def parse(text: str) -> dict:
        return parse_response(tok, tok(text + "<|im_end|>", add_special_tokens=False).input_ids, prefix=prefix,
                              tools=[env.call, env.finish])

    call = parse('{"action":"call","need":1,"tool":"subtitle_grounding"}')["tool_calls"][0]["function"]
    assert call == {"name": "call", "arguments": {"action": "call", "need": 1, "tool": "subtitle_grounding"}}
    assert parse('{"action":"finish"}')["tool_calls"][0]["function"]["name"] == "finish"
    assert not parse('garbage {"action"').get("tool_calls")
    # a tool call renders back as the very action JSON (what the planner was trained to write)
    rendered = tok.apply_chat_template([{"role": "user", "content": "d"},
                                        {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                                                                                             "function": call}]}],
                                       tokenize=False)
    assert '<|im_start|>assistant\n{"action":"call","need":1,"tool":"subtitle_grounding"}<|im_end|>' in rendered


def test_an_episode_runs_the_agent_to_a_judged_answer(tasks_dir):
    from omnidecision.protocol.prompts import load_prompt
    from omnidecision.rollout.environment import LedgerEnvironment, task_rows
    from omnidecision.tasks.loaders import load_tasks

    LedgerEnvironment.configure()
    rows = task_rows(load_tasks(tasks_dir, "synthetic"))
    env = LedgerEnvironment()
    rewards = []
    for row in rows[:4]:
        assert row["prompt"][0]["content"] == load_prompt("planner")
        digest = env.reset(**row)
        assert digest.startswith("QUESTION:")
        for _ in range(20):  # the first actionable need, with the tool its line names; finish when available
            if digest.startswith("The run stopped"):
                break
            m = re.search(r"actionable_need_indices=\[(\d+)", digest)
            if "finish_available=yes" in digest or not m:
                digest = env.finish("finish")
                continue
            line = re.search(rf"^\[{m.group(1)}\] .*?tool=(\w+)", digest, re.M)
            digest = env.call("call", need=int(m.group(1)), tool=line.group(1) if line else None)
        rewards.append(env.get_reward())
    done = LedgerEnvironment.finished
    assert [r["reward"] for r in done] == rewards
    assert all(r["outcome"] != "error" for r in done)
    assert any(r["correct"] for r in done)  # this hand policy solves some synthetic tasks
    # a rollout that ends before the run does is stopped (outcome error) and scores 0
    env.reset(**rows[0])
    assert env.get_reward() == 0.0 and LedgerEnvironment.finished[-1]["outcome"] == "error"


@pytest.mark.slow  # ≈ 2–3 min (an SFT start, then executed rollouts); the fast suite keeps the episode and GRPO tests
def test_environment_grpo_trains_on_judged_rollouts(sft_start, tasks_dir, tmp_path):
    import torch
    from safetensors.torch import load_file

    from omnidecision.grounding.grpo import main, parse_args

    out = tmp_path / "env-grpo"
    args = parse_args(["--config", str(RECIPE), "--model_name_or_path", str(sft_start), "--dataset_name",
                       str(tasks_dir), "--output_dir", str(out), "--max_steps", "2", "--num_generations", "2",
                       "--per_device_train_batch_size", "8", "--generation_batch_size", "8", "--logging_steps", "1",
                       "--learning_rate", "1e-3", "--warmup_steps", "0", "--temperature", "0.5",
                       "--environment_step_budget", "8", "--max_tool_calling_iterations", "8",
                       "--max_completion_length", "2048", "--environment_closure_weight", "1.0"])
    report = main(*args)
    assert report["steps"] == 2 and report["rollouts"] == 16
    rollouts = [json.loads(line) for line in (out / "environment_rollouts.jsonl").read_text().splitlines()]
    # every rollout's reward is its judged run: (judged + closure) / 2
    for r in rollouts:
        assert r["reward"] == pytest.approx((float(r["correct"]) + r["closure"]) / 2)
    # the trainer's logged reward per step is the mean of that step's environment rewards
    history = [h for h in json.loads((out / "log_history.json").read_text()) if "reward" in h]
    assert len(history) == 2
    for i, h in enumerate(history):
        step = [r["reward"] for r in rollouts[8 * i:8 * i + 8]]
        assert h["rewards/LedgerEnvironment/mean"] == pytest.approx(sum(step) / 8, abs=1e-5)
    assert any(r["outcome"] != "error" for r in rollouts), "no rollout reached a stop of the agent's own"
    # the weights moved, and the saved tokenizer keeps the served chat template
    before, after = load_file(sft_start / "model.safetensors"), load_file(out / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)
    tok = json.loads((out / "tokenizer_config.json").read_text())
    served = json.loads((sft_start / "tokenizer_config.json").read_text())
    assert tok.get("chat_template") == served.get("chat_template")


def test_environment_recipe_checks(tmp_path):
    from omnidecision.rl.config import parse_args

    base = ["--config", str(RECIPE), "--model_name_or_path", str(tmp_path), "--dataset_name", str(tmp_path)]
    script_args, training_args, _ = parse_args(base)
    assert script_args.environment == "ledger" and training_args.max_tool_calling_iterations == 15
    with pytest.raises(ValueError, match="select_states must be all"):
        parse_args([*base, "--select_states", "balanced"])
    with pytest.raises(ValueError, match="environment_closure_weight"):
        parse_args([*base, "--environment_closure_weight", "-1"])


def test_grpo_agent_imports_the_environment(tiny_planner, tmp_path):
    """rl imports no agent code and names none: GRPO with the agent in the loop (grounding/grpo.py) imports the
    environment (`ENVIRONMENTS`), and what environment_main needs besides the class comes through it."""
    import inspect

    from transformers import AutoTokenizer

    from omnidecision.grounding.grpo import ENVIRONMENTS
    from omnidecision.rollout.environment import TOOL_CHAT_TEMPLATE, LedgerEnvironment

    env = ENVIRONMENTS["ledger"]
    assert env is LedgerEnvironment
    assert env.use_tool_format(AutoTokenizer.from_pretrained(tiny_planner)).chat_template == TOOL_CHAT_TEMPLATE
    empty = tmp_path / "tasks.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="tasks"):
        env.load_dataset(str(empty), "jsonl")
    # the tools TRL offers the model (its rule: the public plain functions, reset and get_reward aside) stay the
    # planner's two actions: the helpers above are not tools
    tools = {name for name, _ in inspect.getmembers(env, predicate=inspect.isfunction)
             if name not in ("reset", "get_reward") and not name.startswith("_")}
    assert tools == {"call", "finish"}


def test_a_task_set_without_tasks_is_a_clear_error(tmp_path):
    from omnidecision.rollout.environment import LedgerEnvironment, load_task_dataset

    empty = tmp_path / "tasks.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="tasks"):
        load_task_dataset(str(empty), "jsonl")
    with pytest.raises(ValueError, match="no `task` column"):
        LedgerEnvironment().reset(prompt=[])
