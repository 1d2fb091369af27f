"""A circuit breaker per endpoint for collect and eval: a dying server pauses the collection, then stops it.

Every chat backend with a `base_url` (vLLM, an API) is wrapped in a `GuardedBackend` that reports each call to one
`EndpointBreaker`. After `failures` connection failures in a row to the same endpoint (connection refused/reset,
timeouts, 502/503/504, each already retried by the backend itself) the breaker opens: new calls to that endpoint
wait while it probes the endpoint (`GET {base_url}/models`; any HTTP answer means the server is up) with
exponential backoff (tenacity), `pauses` times. A probe that answers closes the breaker and the waiting runs go on;
when none answers, the breaker stops the collection: waiting runs are refused with `EndpointDown` and the runner
raises `RolloutsStopped`, whose message names the endpoint and says how to continue (run the same command again).

A run whose call failed because its endpoint was unreachable is marked (`endpoint_failed()`, a per-job context
variable) so the runner neither writes its `error` record as finished nor counts it as a wrong answer: it is run
again in this process (at most `requeue` times) or, once the collection stopped, at the next start.

    omnidecision collect --config configs/collect/vllm-local.yaml --breaker.failures 3 --breaker.pause_s 5
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_exponential

from omnidecision.protocol.chat import BackendError, ChatBackend, ChatRequest, ChatResponse
from omnidecision.protocol.secrets import endpoint_url
from omnidecision.rollout.deprecated import aliases

logger = logging.getLogger(__name__)

# 502/503/504: a proxy or load balancer in front of a server that is gone; other statuses mean the server answered.
UNREACHABLE_STATUS = (502, 503, 504)


class BreakerSettings(BaseModel):
    """The `breaker:` block of a collect or eval recipe."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="watch each endpoint; False: every failed run is written as `error`")
    failures: int = Field(5, ge=1, description="connection failures in a row to one endpoint that open the breaker")
    pauses: int = Field(3, ge=1, description="probes of an open endpoint (with backoff) before the collection stops")
    pause_s: float = Field(10.0, ge=0, description="wait before the first probe; doubles for each next probe")
    max_pause_s: float = Field(120.0, ge=0, description="longest wait between probes")
    probe_timeout_s: float = Field(10.0, gt=0, description="timeout of one probe request (GET {base_url}/models)")
    requeue: int = Field(2, ge=0, description="times a run that failed on an unreachable endpoint is run again in "
                                             "this process before its `error` record is written")


class EndpointDown(BackendError):
    """A call refused because its endpoint's breaker stopped the collection (a BackendError: runs end cleanly)."""

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(reason)
        self.endpoint = endpoint


class RolloutsStopped(RuntimeError):
    """Raised by the runner once a breaker stopped the rollouts; the message names the endpoint."""

    def __init__(self, endpoint: str, message: str) -> None:
        super().__init__(message)
        self.endpoint = endpoint


# The set of endpoints that failed during the current job (run + judge): set per job by the runner, shared with the
# tasks a run spawns (they copy the context, the set is the same object).
_JOB_FAILURES: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("endpoint_failures", default=None)


def start_job() -> set[str]:
    """Called by the runner before each job: a fresh set of the endpoints this job found unreachable."""
    failed: set[str] = set()
    _JOB_FAILURES.set(failed)
    return failed


def _mark(endpoint: str) -> None:
    failed = _JOB_FAILURES.get()
    if failed is not None:
        failed.add(endpoint)


def is_unreachable(exc: BaseException) -> bool:
    """True when `exc` (or an exception it was raised from) says the endpoint could not be reached: a connection
    error or timeout (openai / httpx / OS), or a 502/503/504. Other HTTP errors mean the server is up."""
    import openai

    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, EndpointDown):
            return True
        if isinstance(e, openai.APIStatusError):
            return e.status_code in UNREACHABLE_STATUS
        if isinstance(e, (openai.APIConnectionError, httpx.TransportError, ConnectionError, TimeoutError)):
            return True
        if isinstance(e, httpx.HTTPStatusError):
            return e.response.status_code in UNREACHABLE_STATUS
        e = e.__cause__ or e.__context__
    return False


class _Endpoint:
    def __init__(self) -> None:
        self.consecutive = 0
        self.reopened = 0  # times the probes found it back since its last successful call
        self.last_reason = ""
        self.recovering: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        self.ready.set()


class EndpointBreaker:
    """One breaker per endpoint (see the module docstring). `stopped` holds the refusal once it has given up."""

    def __init__(self, settings: BreakerSettings | None = None) -> None:
        self.settings = settings or BreakerSettings()
        self._endpoints: dict[str, _Endpoint] = {}
        self.stopped: EndpointDown | None = None
        self.trips = 0

    def _state(self, endpoint: str) -> _Endpoint:
        if endpoint not in self._endpoints:
            self._endpoints[endpoint] = _Endpoint()
        return self._endpoints[endpoint]

    async def admit(self, endpoint: str) -> None:
        """Wait while `endpoint` is being probed; raise `EndpointDown` once the collection is stopped."""
        state = self._state(endpoint)
        while True:
            if self.stopped is not None:
                _mark(endpoint)
                raise self.stopped
            if state.ready.is_set():
                return
            await state.ready.wait()

    def success(self, endpoint: str) -> None:
        state = self._state(endpoint)
        state.consecutive = state.reopened = 0

    def failure(self, endpoint: str, reason: str) -> None:
        """Count one connection failure; the `failures`-th in a row opens the breaker (probing starts)."""
        _mark(endpoint)
        state = self._state(endpoint)
        if not state.ready.is_set() or self.stopped is not None:
            return  # a call that was already in flight when the breaker opened: counted once, by the probes
        state.consecutive += 1
        state.last_reason = reason
        if state.consecutive >= self.settings.failures:
            self.trips += 1
            if state.reopened >= self.settings.pauses:
                # it answers the probe (GET /models) but no call succeeds (e.g. every request times out): stop too
                self.stopped = EndpointDown(endpoint, (
                    f"endpoint {endpoint} is unreachable: it answered the breaker's probe {state.reopened} times, "
                    f"but each time the next {state.consecutive} calls failed (last: {reason})"))
                logger.error("%s; collection stops", self.stopped.reason)
                return
            state.ready.clear()
            logger.warning("endpoint %s: %d connection failures in a row (last: %s); collection paused while it "
                           "is probed", endpoint, state.consecutive, reason)
            state.recovering = asyncio.create_task(self._recover(endpoint, state))

    async def _recover(self, endpoint: str, state: _Endpoint) -> None:
        """Probe with backoff; reopen the endpoint when it answers, else stop the collection."""
        s = self.settings
        first = min(s.pause_s, s.max_pause_s)
        waits: list[float] = [first]

        def before_sleep(rs: RetryCallState) -> None:
            waits.append(rs.upcoming_sleep)
            logger.warning("endpoint %s still unreachable; next probe in %.1fs", endpoint, rs.upcoming_sleep)

        try:
            await asyncio.sleep(first)
            # waits after the first pause: 2p, 4p, … (capped), tenacity's exponential backoff
            backoff = wait_exponential(multiplier=2 * s.pause_s, max=s.max_pause_s)
            async for attempt in AsyncRetrying(stop=stop_after_attempt(s.pauses), wait=backoff,
                                               retry=retry_if_exception_type(httpx.TransportError),
                                               before_sleep=before_sleep, reraise=True):
                with attempt:
                    await probe(endpoint, s.probe_timeout_s)
        except httpx.TransportError as exc:
            paused = ", ".join(f"{w:g}s" for w in waits)
            self.stopped = EndpointDown(endpoint, (
                f"endpoint {endpoint} is unreachable: {state.consecutive} connection failures in a row (last: "
                f"{state.last_reason}), then {s.pauses} probes after pauses of {paused} got no answer "
                f"(last probe: {type(exc).__name__}: {exc})"))
            logger.error("%s; collection stops", self.stopped.reason)
        else:
            logger.warning("endpoint %s answers again; collection resumes", endpoint)
            state.consecutive = 0
            state.reopened += 1
        state.ready.set()  # wakes the waiting calls: they go on, or see `stopped` and are refused

    async def aclose(self) -> None:
        for state in self._endpoints.values():
            if state.recovering is not None and not state.recovering.done():
                state.recovering.cancel()


async def probe(endpoint: str, timeout_s: float) -> None:
    """One liveness probe: GET {endpoint}/models. Any HTTP answer (even 401/404) means the server is up; a
    connection error or timeout raises `httpx.TransportError`. No API key is sent (an answer is all it needs); proxy
    settings from the environment apply, as they do to the OpenAI client."""
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        response = await client.get(endpoint_url(endpoint, "models"))  # joined on the path, never onto a query
    if response.status_code in UNREACHABLE_STATUS:
        raise httpx.RemoteProtocolError(f"HTTP {response.status_code} from {endpoint}/models")


class GuardedBackend:
    """A `ChatBackend` that reports every call of `inner` (which talks to `endpoint`) to the breaker."""

    def __init__(self, inner: ChatBackend, endpoint: str, breaker: EndpointBreaker) -> None:
        self.inner, self.endpoint, self.breaker = inner, endpoint, breaker

    def __getattr__(self, name: str) -> Any:  # spec, aclose, … of the wrapped backend
        if name == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        await self.breaker.admit(self.endpoint)
        try:
            response = await self.inner.chat(request)
        except BackendError as exc:
            if is_unreachable(exc):
                self.breaker.failure(self.endpoint, getattr(exc, "reason", str(exc))[:300])
            raise
        self.breaker.success(self.endpoint)
        return response


def endpoint_of(backend: object) -> str | None:
    """The base URL a backend talks to (None: a local backend such as the scripted teacher)."""
    spec = getattr(backend, "spec", None)
    return getattr(spec, "base_url", None) or None


def guard(backends: dict[str, ChatBackend], breaker: EndpointBreaker | None) -> dict[str, ChatBackend]:
    """Wrap every backend that has an endpoint (unchanged when `breaker` is None)."""
    if breaker is None:
        return backends
    return {role: b if (ep := endpoint_of(b)) is None or isinstance(b, GuardedBackend)
            else GuardedBackend(b, ep, breaker) for role, b in backends.items()}


__getattr__ = aliases(__name__, {"CollectionStopped": "RolloutsStopped"}, globals())  # the old name, one release
