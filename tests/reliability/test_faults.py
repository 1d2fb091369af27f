"""Backend faults during a collection: connection refused, HTTP 500/429, a slow endpoint past the timeout,
truncated and non-JSON bodies. The fault-injecting server is a stub (the only place a stub stands in for vLLM).

Every run must end (no hang: the test's own timeout), a run that cannot proceed ends with outcome `error` and the
reason, and the collection as a whole goes on: one record per task, none lost, every line parses. Wall-clock bounds
on each call are not checked here: they depend on the machine's load, and a fast test must not.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from omnidecision.agent.config import AgentConfig
from omnidecision.backends.factory import build_backends
from omnidecision.protocol.chat import BackendSpec
from omnidecision.rollout.breaker import BreakerSettings, RolloutsStopped
from omnidecision.rollout.options import RolloutOptions
from omnidecision.rollout.runner import run_tasks
from omnidecision.rollout.store import read_records

FAULTS = ("ok",) * 7 + ("http500", "http429", "slow", "truncated", "garbage", "drop")


def _completion(content: str) -> bytes:
    return json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "faulty",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }).encode()


class FaultServer:
    """Answers each chat request with a fault drawn from `FAULTS` (seeded); counts what it injected."""

    def __init__(self, seed: int, slow_s: float) -> None:
        self.rng, self.lock = random.Random(seed), threading.Lock()
        self.injected: collections.Counter[str] = collections.Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server.lock:
                    fault = server.rng.choice(FAULTS)
                    server.injected[fault] += 1
                if fault == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "slow":
                    time.sleep(slow_s)
                status = {"http500": 500, "http429": 429}.get(fault, 200)
                body = _completion('{"action": "call", "need": 0}')
                if fault == "garbage":
                    body = b"<html>upstream error</html>"
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2] if fault == "truncated" else body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a slow reply: that is the point of the fault

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TIMEOUT_S, RETRIES, MAX_WAIT_S, STEP_BUDGET, CONCURRENCY = 0.5, 3, 0.05, 6, 4
SLOW_S = 8.0  # a slow reply, far past TIMEOUT_S: the client gives up on it and retries


def _collect(tasks, planner_url: str, out_file, timeout_s: float = TIMEOUT_S, breaker: BreakerSettings | None = None):
    backends = build_backends({
        "default": BackendSpec(kind="teacher"),
        "planner": BackendSpec(kind="openai", base_url=planner_url, model="faulty", timeout_s=timeout_s,
                               max_retries=RETRIES, structured_output=True),
    })
    for b in backends.values():  # keep the backoff short in tests; the policy itself is what is under test
        if hasattr(b, "retry_wait_s"):
            b.retry_wait_s, b.retry_max_wait_s = 0.01, MAX_WAIT_S
    config = AgentConfig(step_budget=STEP_BUDGET)
    return asyncio.run(run_tasks(tasks, config, backends, RolloutOptions(
        out_file=out_file, concurrency=CONCURRENCY, progress=False, breaker=breaker or BreakerSettings())))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("seed", [0, 1])
def test_collection_survives_injected_faults(synth_tasks, tmp_path, seed):
    server = FaultServer(seed, slow_s=SLOW_S)
    try:
        summary = _collect(synth_tasks, server.url, tmp_path / "runs.jsonl")
    finally:
        server.close()
    records = [r for _, r in read_records(tmp_path / "runs.jsonl")]
    assert sorted(r.task_id for r in records) == sorted(t.id for t in synth_tasks)  # none lost, none twice
    assert sum(server.injected[f] for f in FAULTS if f != "ok") > 0
    for r in records:
        if r.outcome == "error":
            assert r.error  # the reason is recorded
    assert any(r.outcome != "error" for r in records)  # ok replies let some runs proceed
    assert summary.done == len(synth_tasks) and sum(summary.outcomes.values()) == len(synth_tasks)
    assert server.injected["slow"] > 0  # the timeout path was exercised (and the run still ended)
    assert any(s.raw_output for r in records for s in r.steps)  # answered planner calls were recorded


def test_dead_endpoint_ends_every_run_with_error_and_reason(synth_tasks, tmp_path):
    """Without the circuit breaker, each run ends with `error` and the reason (a restart retries them); with it,
    the collection stops naming the endpoint and marks no run (tests/collect/test_endpoint_faults.py)."""
    url = f"http://127.0.0.1:{_free_port()}/v1"
    _collect(synth_tasks[:4], url, tmp_path / "runs.jsonl", breaker=BreakerSettings(enabled=False))
    records = [r for _, r in read_records(tmp_path / "runs.jsonl")]
    assert len(records) == 4
    assert all(r.outcome == "error" and "connection" in (r.error or "").lower() for r in records)
    with pytest.raises(RolloutsStopped, match=f"endpoint {url} is unreachable"):
        _collect(synth_tasks[:4], url, tmp_path / "stopped.jsonl", breaker=BreakerSettings(failures=2, pause_s=0.01))
    assert list(read_records(tmp_path / "stopped.jsonl")) == []
