"""Reward-judge fault injection: a tiny in-test OpenAI-compatible HTTP server answering 500s, garbage, slow
replies or out-of-range scores. Failures must be counted and give None (skipped), never a silent 0 or 1."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from omnidecision.rewards import get_reward_funcs
from omnidecision.rewards.llm_judge import RewardJudge
from tests.stub_chat import ChatStubHandler, chat_completion

GOOD = '{"action": "call", "need": 1}'


class _Handler(ChatStubHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        server = self.server
        server.requests.append(body)
        mode = server.mode
        if mode == "500":
            self._send(500, b'{"error": {"message": "boom"}}')
            return
        if mode == "slow":
            time.sleep(server.delay)
        content = {
            "ok": json.dumps({"score": 0.75, "reason": "targets the actionable need"}),
            "slow": json.dumps({"score": 0.25, "reason": "late"}),
            "garbage": "I would rate this decision highly!",
            "out_of_range": json.dumps({"score": 7, "reason": "too high"}),
        }.get(mode)
        if mode == "notjson":
            self._send(200, b"<html>proxy error</html>")
            return
        self._send(200, chat_completion(content, prompt_tokens=10, completion_tokens=5))



@pytest.fixture
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.mode, server.delay, server.requests = "ok", 0.0, []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _judge(stub, tmp_path=None, timeout_s=5.0, concurrency=4):
    return RewardJudge.from_options(base_url=f"http://127.0.0.1:{stub.server_address[1]}/v1", model="judge",
                                    timeout_s=timeout_s, concurrency=concurrency,
                                    cache_path=str(tmp_path / "judge.jsonl") if tmp_path else None)


def test_success_cache_and_disk_cache(stub, ledger, tmp_path):
    with _judge(stub, tmp_path) as judge:
        assert judge.score([(ledger, GOOD), (ledger, GOOD), (ledger, "not an action")]) == [0.75, 0.75, None]
        assert len(stub.requests) == 1  # the duplicate shares one request, the invalid decision is not sent
        assert judge.stats.skipped_invalid == 1 and judge.stats.failed == 0
        sent = stub.requests[0]
        assert sent["response_format"]["type"] == "json_schema"
        assert "LEDGER DIGEST" in sent["messages"][1]["content"] and '"need":1' in sent["messages"][1]["content"]
        assert judge.score([(ledger, [{"role": "assistant", "content": GOOD}])]) == [0.75]
        assert len(stub.requests) == 1 and judge.stats.cache_hits == 2
    with _judge(stub, tmp_path) as fresh:  # a new judge reads the on-disk cache
        assert fresh.score([(ledger, GOOD)]) == [0.75]
        assert len(stub.requests) == 1


@pytest.mark.parametrize(("mode", "reason"), [("500", "backend_error"), ("garbage", "unparseable"),
                                              ("notjson", "backend_error"), ("out_of_range", "unparseable")])
def test_failures_are_counted_and_skipped(stub, ledger, mode, reason, tmp_path):
    stub.mode = mode
    with _judge(stub, tmp_path) as judge:
        assert judge.score([(ledger, GOOD), (ledger, '{"action": "finish"}')]) == [None, None]
        assert judge.stats.failures[reason] == 2 and judge.stats.successes == 0
        assert not (tmp_path / "judge.jsonl").exists()  # failures are not cached
        stub.mode = "ok"  # the next batch retries them
        assert judge.score([(ledger, GOOD)]) == [0.75]


def test_timeout(stub, ledger):
    stub.mode, stub.delay = "slow", 1.5
    with _judge(stub, timeout_s=0.3) as judge:
        assert judge.score([(ledger, GOOD)]) == [None]
        assert judge.stats.failures["timeout"] == 1


def test_connection_refused_is_a_failure(ledger):
    with RewardJudge.from_options(base_url="http://127.0.0.1:9/v1", model="judge", timeout_s=2) as judge:
        assert judge.score([(ledger, GOOD)]) == [None]
        assert judge.stats.failures["backend_error"] == 1


def test_reward_func_inside_a_running_event_loop(stub, ledger):
    """TRL may call reward functions from code that already runs an asyncio loop: the judge must still work."""
    logged = {}
    stub.mode = "500"
    func = get_reward_funcs(["judge"], judge={"base_url": f"http://127.0.0.1:{stub.server_address[1]}/v1",
                                              "model": "judge", "timeout_s": 5})[0]

    async def inside():
        return func([GOOD], ledger=[ledger.model_dump_json()], log_metric=logged.__setitem__)

    assert asyncio.run(inside()) == [None]
    assert logged["judge/failures"] == 1.0
    func.judge.close()


def test_bad_cache_line_names_the_file_and_line(stub, ledger, tmp_path, caplog):
    path = tmp_path / "judge.jsonl"
    path.write_text('{"key": "a", "score": 0.5}\nnot json\n')
    with _judge(stub, tmp_path) as judge:
        assert "a" in judge.cache
    assert f"{path}:2" in caplog.text
