"""One small async interface for every model backend (OpenAI-compatible endpoints, scripted teacher, replay).

A backend gets a `ChatRequest` (role, messages, optional JSON schema) and returns a `ChatResponse`.
`context` carries the run's task, ledger and latest observation: LLM backends ignore it, offline
backends (the scripted teacher) use it. A backend failure raises `BackendError` with the reason.

    >>> total = Usage(prompt_tokens=120, completion_tokens=8) + Usage(prompt_tokens=30, completion_tokens=2)
    >>> total.prompt_tokens, total.completion_tokens
    (150, 10)
    >>> BackendSpec(kind="teacher").model_dump()["base_url"] is None
    True
    >>> BackendError("HTTP 429 after 3 retries").reason
    'HTTP 429 after 3 retries'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.protocol.secrets import EndpointSecrets

Role = Literal["decompose", "planner", "critic", "finalizer", "judge", "perception", "summarizer"]


class Usage(BaseModel):
    """Tokens of one call (or a sum of calls), as the endpoint reported them.

    Attributes:
        prompt_tokens: tokens of the prompt sent
        completion_tokens: tokens of the completion received
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens)


@dataclass
class ChatRequest:
    role: Role
    messages: list[dict[str, Any]]
    json_schema: dict[str, Any] | None = None
    schema_name: str = "output"
    context: dict[str, Any] = field(default_factory=dict)


class ChatResponse(BaseModel):
    text: str
    usage: Usage = Usage()
    latency_s: float = 0.0
    model: str = ""
    cost: float | None = None  # set when the backend's prices are configured


class BackendError(Exception):
    """The backend could not produce a reply (after its retries); `reason` is what a report shows."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ChatBackend(Protocol):
    async def chat(self, request: ChatRequest) -> ChatResponse: ...


class BackendSpec(EndpointSecrets):
    """Where one role's model lives. kind="openai": any OpenAI-compatible endpoint (vLLM, OpenAI, Gemini);
    kind="teacher": the scripted teacher (synthetic tasks); other kinds are registered by name
    (`backends.factory.BACKEND_KINDS`). The key stays in the environment: `api_key_env` names a variable, and no
    credential may sit in `base_url` or `options` (both are written to manifest.json): protocol/secrets.py.

    Attributes:
        kind: backend kind: `openai` (any OpenAI-compatible endpoint), `teacher` (the scripted teacher), or another
            registered kind (backends.factory.BACKEND_KINDS)
        base_url: the endpoint's URL, e.g. http://127.0.0.1:8000/v1 (no credential in it)
        model: the model name sent in each request (the served name on a vLLM server)
        api_key_env: name of the environment variable that holds the API key (never the key itself)
        temperature: sampling temperature of this role's calls
        top_p: nucleus sampling mass
        max_tokens: completion tokens per call
        timeout_s: seconds before a call times out
        max_retries: retries of a failed call (connection errors, 5xx) before it counts as failed
        structured_output: ask for JSON output (response_format json_schema)
        enable_thinking: Qwen3's `enable_thinking` chat-template switch; must match training (train/serve parity)
        endpoint_kind: which request fields the endpoint takes beyond OpenAI's: `vllm`, `openai`, or `auto` (asks
            GET /models once)
        price_per_1k_prompt: price per 1,000 prompt tokens for cost reports (None: the price table decides)
        price_per_1k_completion: price per 1,000 completion tokens for cost reports (None: the price table decides)
        max_concurrency: requests in flight to this endpoint at once
        options: kind-specific options (e.g. the teacher's noise and habits; `extra_body` for vLLM)
    """

    # a refused value is never echoed back (pydantic would print `input_value=...` in the error)
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    kind: str = "openai"
    base_url: str | None = Field(
        None, description="the endpoint, e.g. http://node-a:8000/v1 (None: the client's default). No credential in "
        "it: user:password@ and a query or fragment parameter named like one (?api_key=, ?token=, ?sig=, ...) are "
        "refused, naming the parameter, never its value; the key goes in the variable api_key_env names")
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    timeout_s: float = 60.0
    max_retries: int = 3
    structured_output: bool = True  # send response_format json_schema
    enable_thinking: bool = False  # must match training (train/serve parity)
    # Which request fields the endpoint takes beyond OpenAI's schema (backends/openai_backend.py): "vllm" adds
    # chat_template_kwargs (enable_thinking) and passes every extra_body key; "openai" sends only OpenAI's
    # fields (OpenAI answers 400 to any other); "auto" asks the endpoint's /models once (vLLM says owned_by "vllm").
    endpoint_kind: Literal["auto", "vllm", "openai"] = "auto"
    price_per_1k_prompt: float | None = None
    price_per_1k_completion: float | None = None
    max_concurrency: int = 64
    options: dict[str, Any] = Field(
        default_factory=dict, description="kind-specific (e.g. teacher noise knobs); openai: `extra_body` (request "
        "fields beyond OpenAI's) and `default_headers` (HTTP headers sent with every request, e.g. a gateway's "
        "session Cookie). An option named like a credential (Authorization, X-Api-Key, token) is refused; every "
        "header value is shown and written as *** (protocol/redaction.py)")

