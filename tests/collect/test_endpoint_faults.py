"""A dying planner endpoint during a collection: error runs are retried on restart (their old records moved aside),
the circuit breaker pauses, probes and stops the collection naming the endpoint, and the same command finishes it.

The planner is an OpenAI-compatible stub (tests/stub_chat.py: the fault injection is the point) answering
`{"action": "finish"}`; every other role is the scripted teacher, so each run is a real agent run. Kills are driven
by the number of records written (or of requests seen), never by sleeps."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from omnidecision.eval.report import build_report, render_markdown
from omnidecision.protocol.chat import BackendError, ChatRequest
from omnidecision.protocol.records import RunRecord
from omnidecision.rollout.breaker import (
    BreakerSettings,
    EndpointBreaker,
    GuardedBackend,
    RolloutsStopped,
    is_unreachable,
)
from omnidecision.rollout.engine import run_rollouts
from omnidecision.rollout.output import shard_path
from omnidecision.rollout.recipe import load_recipe
from omnidecision.rollout.store import read_records, supersede_errors, superseded_path
from omnidecision.tasks.synth import write_suite
from tests.stub_chat import ChatStubHandler, chat_completion

from .conftest import CLI

N_TASKS = 30


class Planner(ChatStubHandler):
    """Answers every chat request with a finish action; while `down`, drops the connection without a reply (what
    a crashed server behind a live socket does). `come_back_after_probes`: the n-th liveness probe while down
    brings it back up (the breaker's recovery, driven by what the server saw)."""

    down = False
    posts = 0
    probes = 0
    come_back_after_probes: int | None = None
    # goes down by itself (once), before answering a request, when this holds: read in the handler, so the
    # collection cannot run ahead of a watcher thread that the machine's load keeps from being scheduled
    down_when: Callable[[], bool] | None = None
    lock = threading.Lock()

    def _drop(self) -> None:
        self.close_connection = True  # no status line: the client sees the server disconnect

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with Planner.lock:
            Planner.posts += 1
            if not Planner.down and Planner.down_when is not None and Planner.down_when():
                Planner.down, Planner.down_when = True, None  # once: a server brought back stays up
            down = Planner.down
        if down:
            return self._drop()
        self._send(200, chat_completion('{"action": "finish"}'))

    def do_GET(self) -> None:  # /v1/models: the breaker's probe
        with Planner.lock:
            if Planner.down:
                Planner.probes += 1
                if Planner.come_back_after_probes is not None and Planner.probes >= Planner.come_back_after_probes:
                    Planner.down = False
            down = Planner.down
        if down:
            return self._drop()
        self._send(200, b'{"object": "list", "data": [{"id": "planner", "object": "model"}]}')


class Server:
    """The stub on a fixed port, started and killed (listening socket closed: connection refused) at will."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.httpd: ThreadingHTTPServer | None = None

    def start(self) -> Server:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Planner)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return self

    def kill(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
def planner():
    Planner.down, Planner.posts, Planner.probes, Planner.come_back_after_probes = False, 0, 0, None
    Planner.down_when = None
    server = Server().start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth30")
    write_suite(N_TASKS, 5, out)
    return out


def overrides(suite: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    return [f"tasks.path={suite}", "tasks.format=synthetic", "backends.default.kind=teacher",
            "backends.planner.kind=openai", f"backends.planner.base_url={base_url}", "backends.planner.model=planner",
            "backends.planner.max_retries=0", "backends.planner.timeout_s=10", f"out={out}", "progress=false",
            "concurrency=4", "breaker.failures=3", "breaker.pauses=2", "breaker.pause_s=0.05", *extra]


def records(out: Path) -> list[RunRecord]:
    return [r for _, r in read_records(shard_path(out, 0, 1))]


def assert_complete(out: Path, suite_ids: set[str]) -> None:
    got = records(out)
    keys = Counter((r.task_id, r.sample) for r in got)
    assert max(keys.values()) == 1, [k for k, v in keys.items() if v > 1]  # none duplicated
    assert set(keys) == {(t, 0) for t in suite_ids}
    assert Counter(r.outcome for r in got)["error"] == 0, Counter(r.outcome for r in got)


def task_ids(suite: Path) -> set[str]:
    from omnidecision.tasks.loaders import load_tasks

    return {t.id for t in load_tasks(suite, "synthetic")}


# ------------------------------------------------------------------------------------------ errors retried


def test_error_runs_are_retried_on_restart_and_moved_aside(suite: Path, tmp_path: Path, planner: Server) -> None:
    out = tmp_path / "runs"
    # 1) the endpoint is down and no breaker watches it: the old behaviour, every run is written as `error`
    Planner.down = True
    first = asyncio.run(run_rollouts(load_recipe(None, overrides(suite, out, planner.base_url,
                                                                 "breaker.enabled=false"))))
    assert first.outcomes == Counter({"error": N_TASKS})
    errors = records(out)
    report = build_report(errors)
    assert (report["error_runs"], report["wrong"], report["correct"]) == (N_TASKS, 0, 0)
    assert sum(report["attribution"].values()) == 0  # an error is no wrong answer: nothing to attribute
    assert f"{N_TASKS} of {N_TASKS} runs ended with outcome error" in render_markdown(report)
    shard = shard_path(out, 0, 1)
    error_bytes = shard.read_bytes()

    # 2) endpoint back; --no-retry-errors: the error runs count as finished
    Planner.down = False
    kept = asyncio.run(run_rollouts(load_recipe(None, overrides(suite, out, planner.base_url, "retry_errors=false"))))
    assert (kept.done, kept.skipped, kept.retried_errors) == (0, N_TASKS, 0)
    assert not superseded_path(shard).exists()

    # 3) the default: every error run runs again; the old records move aside byte for byte, nothing duplicated
    again = asyncio.run(run_rollouts(load_recipe(None, overrides(suite, out, planner.base_url))))
    assert (again.done, again.skipped, again.retried_errors) == (N_TASKS, 0, N_TASKS)
    assert superseded_path(shard).read_bytes() == error_bytes
    assert_complete(out, task_ids(suite))
    assert build_report(records(out))["error_runs"] == 0


def test_supersede_keeps_finished_runs_in_place(tmp_path: Path) -> None:
    shard = shard_path(tmp_path, 0, 1)
    recs = [RunRecord(run_id=f"r{i}", task_id=f"t{i}", outcome="error" if i % 2 else "accepted") for i in range(6)]
    shard.write_text("".join(r.model_dump_json() + "\n" for r in recs), "utf-8")
    assert supersede_errors(shard) == 3
    assert [r.task_id for r in records(tmp_path)] == ["t0", "t2", "t4"]
    assert [RunRecord.model_validate_json(x).task_id for x in superseded_path(shard).read_text().splitlines()] == [
        "t1", "t3", "t5"]
    assert supersede_errors(shard) == 0  # nothing left to move


# ------------------------------------------------------------------------------------------ the breaker


def test_breaker_pauses_and_the_collection_resumes_when_the_endpoint_answers(suite: Path, tmp_path: Path,
                                                                              planner: Server) -> None:
    """The endpoint drops every request from the 10th record on; its 2nd probe finds it back: the collection
    finishes in one go, the runs that failed meanwhile run again, no error record is written."""
    out = tmp_path / "runs"
    Planner.come_back_after_probes = 2
    shard = shard_path(out, 0, 1)
    Planner.down_when = lambda: _lines(shard) >= N_TASKS // 3
    summary = asyncio.run(run_rollouts(load_recipe(None, overrides(suite, out, planner.base_url))))
    assert Planner.probes == 2 and not Planner.down
    assert summary.requeued >= 3  # the failed in-flight runs were run again, not written
    assert_complete(out, task_ids(suite))


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def _cli(recipe: Path) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "collect", "--config", str(recipe)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_server_killed_at_a_third_then_restarted_with_the_same_command(suite: Path, tmp_path: Path,
                                                                       planner: Server) -> None:
    """Acceptance: kill the server at about a third of the collection (listening socket closed), the collection
    stops naming the endpoint after the breaker's limit (not after marking every task); restart the server and the
    same command: every task ends with one non-error record."""
    out = tmp_path / "runs"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_yaml(overrides(suite, out, planner.base_url)), "utf-8")
    shard = shard_path(out, 0, 1)
    Planner.down_when = lambda: _lines(shard) >= N_TASKS // 3  # it stops answering at a third ...
    proc = _cli(recipe)
    while proc.poll() is None and not Planner.down:
        time.sleep(0.002)
    planner.kill()  # ... then its listening socket closes (connection refused)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err[-3000:]
    assert planner.base_url in err and "unreachable" in err and "Run the same command again" in err, err[-3000:]
    written = records(out)
    assert N_TASKS // 3 <= len(written) < N_TASKS  # stopped part-way: the rest are not marked
    assert not any(r.outcome == "error" for r in written)  # in-flight runs that died are not finished errors

    Planner.down = False
    planner.start()  # the same port: the manifest's backends are unchanged
    proc = _cli(recipe)
    output, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert f"{len(written)} already done" in output
    assert_complete(out, task_ids(suite))


def test_endpoint_down_from_the_start_stops_after_the_breakers_limit(suite: Path, tmp_path: Path,
                                                                     planner: Server) -> None:
    out = tmp_path / "runs"
    planner.kill()
    t0 = time.perf_counter()
    with pytest.raises(RolloutsStopped) as info:
        asyncio.run(run_rollouts(load_recipe(None, overrides(suite, out, planner.base_url))))
    assert info.value.endpoint == planner.base_url
    msg = str(info.value)
    assert "3 connection failures in a row" in msg and "2 probes" in msg and f"the other {N_TASKS}" in msg, msg
    assert records(out) == []  # no task marked as error
    assert time.perf_counter() - t0 < 30


def test_breaker_counts_only_unreachable_failures() -> None:
    """A 4xx or a malformed reply means the server is up: no pause. Connection errors count; a success resets."""
    import httpx
    import openai

    request = httpx.Request("POST", "http://x/v1/chat/completions")
    refused = openai.APIConnectionError(request=request)
    bad_request = openai.BadRequestError("bad", response=httpx.Response(400, request=request), body=None)
    gateway = openai.InternalServerError("gw", response=httpx.Response(502, request=request), body=None)

    def raised_from(exc: Exception) -> BackendError:
        try:
            raise BackendError("x") from exc
        except BackendError as e:
            return e

    assert is_unreachable(raised_from(refused)) and is_unreachable(raised_from(gateway))
    assert not is_unreachable(raised_from(bad_request)) and not is_unreachable(BackendError("no choices"))

    class Flaky:
        spec = None

        def __init__(self) -> None:
            self.fail_with: Exception | None = None

        async def chat(self, request: ChatRequest):
            if self.fail_with is not None:
                raise raised_from(self.fail_with)
            from omnidecision.protocol.chat import ChatResponse

            return ChatResponse(text="ok")

    async def scenario() -> EndpointBreaker:
        breaker = EndpointBreaker(BreakerSettings(failures=2, pauses=1, pause_s=0.0))
        inner = Flaky()
        b = GuardedBackend(inner, "http://127.0.0.1:9/v1", breaker)  # port 9 (discard): nothing listens
        req = ChatRequest(role="planner", messages=[])
        for exc in (bad_request, refused, None, refused, bad_request):  # never two unreachable in a row
            inner.fail_with = exc
            try:
                await b.chat(req)
            except BackendError:
                pass
        assert breaker.trips == 0
        for _ in range(2):
            inner.fail_with = refused
            with pytest.raises(BackendError):
                await b.chat(req)
        assert breaker.trips == 1
        inner.fail_with = None
        with pytest.raises(BackendError, match="unreachable"):  # the probe of port 9 fails: stopped
            await b.chat(req)
        return breaker

    breaker = asyncio.run(scenario())
    assert breaker.stopped is not None and breaker.stopped.endpoint == "http://127.0.0.1:9/v1"


def test_an_endpoint_that_answers_probes_but_fails_every_call_stops_too(planner: Server) -> None:
    """An overloaded server: `GET /models` answers, every chat call times out. The breaker reopens it `pauses`
    times, then stops (it does not cycle forever)."""
    import httpx
    import openai

    timeout = openai.APITimeoutError(request=httpx.Request("POST", planner.base_url))

    class TimesOut:
        spec = None

        async def chat(self, request: ChatRequest):
            raise BackendError("timed out") from timeout

    async def scenario() -> tuple[EndpointBreaker, int]:
        breaker = EndpointBreaker(BreakerSettings(failures=2, pauses=2, pause_s=0.0))
        b = GuardedBackend(TimesOut(), planner.base_url, breaker)
        calls = 0
        while breaker.stopped is None and calls < 50:
            calls += 1
            with pytest.raises(BackendError):
                await b.chat(ChatRequest(role="planner", messages=[]))
        return breaker, calls

    breaker, calls = asyncio.run(scenario())
    assert breaker.stopped is not None and "answered the breaker's probe 2 times" in breaker.stopped.reason
    assert breaker.trips == 3 and calls == 6  # 2 failures per opening, 2 reopenings, then the stop


def recipe_yaml(items: list[str]) -> str:
    """`a.b=v` overrides as the nested YAML of a recipe file."""
    import yaml

    from omnidecision.rollout.recipe import set_path

    data: dict = {}
    for item in items:
        set_path(data, item)
    return yaml.safe_dump(data, sort_keys=False)


@pytest.mark.slow
@pytest.mark.vllm
def test_real_vllm_server_killed_at_a_third_then_restarted(tiny_model_dir: Path, suite: Path, tmp_path: Path) -> None:
    """The acceptance run with a real vLLM CPU server serving the tiny planner: SIGKILL it once a third of the
    records are written; the collection stops naming it (exit 3, no error record); a new server on the same port and
    the same command finish every task once (≈ 2 minutes: two server starts)."""
    import importlib.util
    import os
    import signal

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    from omnidecision.serving.vllm_server import VLLMServer

    server = VLLMServer(tiny_model_dir, served_name="planner", max_model_len=4096).start()
    out = tmp_path / "runs"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_yaml([
        *overrides(suite, out, server.base_url, "backends.planner.max_tokens=48", "agent.step_budget=3",
                   "breaker.pause_s=0.5"),
        "backends.planner.max_retries=1"]), "utf-8")
    shard = shard_path(out, 0, 1)
    try:
        proc = _cli(recipe)
        while proc.poll() is None and not (shard.is_file() and shard.read_bytes().count(b"\n") >= N_TASKS // 3):
            time.sleep(0.002)
        assert server.proc is not None and proc.poll() is None, "the collection ended before the kill"
        os.killpg(server.proc.pid, signal.SIGKILL)  # the server and its engine process die at once
        server.proc.wait()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 3, err[-3000:]
        assert server.base_url in err and "unreachable" in err, err[-3000:]
        written = records(out)
        assert N_TASKS // 3 <= len(written) < N_TASKS and not any(r.outcome == "error" for r in written)
    finally:
        server.stop()
    with VLLMServer(tiny_model_dir, port=server.port, served_name="planner", max_model_len=4096):
        proc = _cli(recipe)
        output, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert f"{len(written)} already done" in output
    assert_complete(out, task_ids(suite))
