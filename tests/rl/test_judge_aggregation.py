"""A failed reward-judge call is LEFT OUT of a sample's reward, through TRL's own reward aggregation.

TRL's `GRPOTrainer._generate_and_score_completions` (reward functions → NaN for None → weighted `nansum` → group
baseline → advantages) runs on a tiny local planner; only the completions are fixed, through TRL's `rollout_func`
hook, so the closure score of each decision is known. The judge is a real `RewardJudge` on an in-test HTTP stub that
fails (HTTP 500) for one decision: fault injection. The per-sample reward is read back from TRL's own outputs: with
`scale_rewards: none` and one group, reward_i = logged mean reward + advantage_i.

    .venv/bin/pytest tests/rl/test_judge_aggregation.py -q
"""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from omnidecision.ledger import Ledger
from omnidecision.protocol.rows import rl_row
from omnidecision.rewards.closure import EXAMPLE_LEDGER, ClosureRubric
from tests.stub_chat import ChatStubHandler, chat_completion

pytestmark = pytest.mark.requires("trl")  # skips without it; fails under CI=true (tests/conftest.py)

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "grpo" / "tiny-cpu.yaml"
RIGHT = '{"action": "call", "need": 0, "tool": "audio_scouting"}'  # closure 1.0 on EXAMPLE_LEDGER
WRONG_TOOL = '{"action": "call", "need": 0, "tool": "web_search"}'  # closure 0.3: format + finish only
JUDGE_SCORE = 0.5


class _Judge(ChatStubHandler):
    """Answers 0.5 for every decision, except that a decision using web_search gets the server's `mode`:
    "fail" → HTTP 500 (the judge call fails), "zero" → a valid score of 0."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        decision = body["messages"][-1]["content"].split("CANDIDATE DECISION:")[-1]
        if "web_search" in decision and self.server.mode == "fail":
            self._send(500, b'{"error": {"message": "judge overloaded"}}')
            return
        score = 0.0 if "web_search" in decision else JUDGE_SCORE
        content = json.dumps({"score": score, "reason": "stub"})
        self._send(200, chat_completion(content))



@pytest.fixture
def judge_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    server.mode = "fail"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _fixed_rollout(texts: list[str]):
    """A TRL `rollout_func` that returns `texts` (one per prompt entry) as the completions."""

    def rollout(prompts, trainer):
        tok = trainer.processing_class
        prompt_ids = [tok(tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True,
                                                  enable_thinking=False), add_special_tokens=False)["input_ids"]
                      for p in prompts]
        completion_ids = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids,
                "logprobs": [[0.0] * len(ids) for ids in completion_ids]}

    return rollout


def _rewards(tiny_planner, tmp_path, reward_funcs, reward_weights: list[float]) -> list[float]:
    """The per-sample rewards TRL computes for the group [RIGHT, WRONG_TOOL] on one ledger state."""
    import datasets
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from omnidecision.rl.config import parse_args

    _, training, _ = parse_args([
        "--config", str(RECIPE), "--model_name_or_path", str(tiny_planner), "--dataset_name", str(tmp_path),
        "--output_dir", str(tmp_path / "out"), "--num_generations", "2", "--per_device_train_batch_size", "2",
        "--generation_batch_size", "2", "--scale_rewards", "none", "--reward_weights",
        *[str(w) for w in reward_weights], "--log_completions", "false", "--report_to", "none"])
    row = rl_row(Ledger.model_validate_json(EXAMPLE_LEDGER), task_id="t", run_id="r", level="1", category="c")
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_planner))
    trainer = GRPOTrainer(model=str(tiny_planner), reward_funcs=reward_funcs, args=training,
                          train_dataset=datasets.Dataset.from_list([row]), processing_class=tokenizer,
                          rollout_func=_fixed_rollout([RIGHT, WRONG_TOOL]))
    trainer.model.train()  # TRL's "train" mode: metrics land in _metrics["train"]
    out = trainer._generate_and_score_completions([row, row])
    mean = trainer._metrics["train"]["reward"][-1]
    return [round(mean + float(a), 6) for a in out["advantages"]]


def test_a_failed_judge_is_left_out_not_scored_zero(tiny_planner, tmp_path, judge_server, monkeypatch):
    from omnidecision.rewards import get_reward_funcs
    from omnidecision.rl.config import parse_args

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    url = f"http://127.0.0.1:{judge_server.server_address[1]}/v1"
    script, _, _ = parse_args(["--config", str(RECIPE), "--model_name_or_path", "m", "--reward_funcs", "closure",
                               "--reward_weights", "1.0", "--judge_weight", "1.0", "--judge_base_url", url,
                               "--judge_model", "judge", "--judge_timeout_s", "5"])
    closure = ClosureRubric()([RIGHT, WRONG_TOOL], ledger=[EXAMPLE_LEDGER] * 2)
    assert closure == [1.0, 0.3]

    # the recipe's layout: the judge inside the closure reward (closure 1, judge 1)
    judge_server.mode = "fail"
    funcs = get_reward_funcs(script.reward_funcs, **script.reward_params())
    failed = _rewards(tiny_planner, tmp_path, funcs, [1.0])
    assert failed[0] == pytest.approx((closure[0] + JUDGE_SCORE) / 2)
    assert failed[1] == pytest.approx(closure[1])  # the judge left out: the sample keeps its closure score
    judge_server.mode = "zero"
    funcs = get_reward_funcs(script.reward_funcs, **script.reward_params())
    zero = _rewards(tiny_planner, tmp_path, funcs, [1.0])
    assert zero[1] == pytest.approx(closure[1] / 2)  # a real score of 0 does count ...
    assert failed[1] != pytest.approx(zero[1])  # ... and a failure is not one


def test_a_separate_judge_reward_counts_a_failure_as_zero_in_trl(tiny_planner, tmp_path, judge_server, monkeypatch):
    """Why the recipe check refuses `reward_funcs: [closure, judge]`: TRL's nansum makes a failed call (None) give
    the same reward as a judge score of 0."""
    from omnidecision.rewards.closure import closure_reward, get_judge_reward
    from omnidecision.rl.config import parse_args

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    url = f"http://127.0.0.1:{judge_server.server_address[1]}/v1"
    rewards = {}
    for mode in ("fail", "zero"):
        judge_server.mode = mode
        judge = get_judge_reward(base_url=url, model="judge", timeout_s=5)
        rewards[mode] = _rewards(tiny_planner, tmp_path, [closure_reward, judge], [1.0, 1.0])
    assert rewards["fail"] == rewards["zero"] == [1.0 + JUDGE_SCORE, 0.3]
    with pytest.raises(ValueError, match="nansum"):
        parse_args(["--config", str(RECIPE), "--reward_funcs", "closure", "judge", "--reward_weights", "1", "1",
                    "--judge_base_url", url, "--judge_model", "judge"])
