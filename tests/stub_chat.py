"""A fault-injection stand-in for an OpenAI-compatible chat endpoint (the only place the tests stub a server: to
send 500s, timeouts and garbage a real vLLM server would not). Subclass `ChatStubHandler`, implement `do_POST`.

Every stub records what it receives: each request a `ChatStubHandler` serves is appended, as a `Received` (method,
path, headers, raw body, JSON body), to its server's `received` list before `do_POST`/`do_GET` run (the body is
read once and handed back to the handler unchanged), so a test can assert what the project SENT (model,
temperature, max tokens, headers) as well as what it did with the answer (tests/reliability/test_requests_pinned.py).
"""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

_RECORD_LOCK = threading.Lock()


@dataclass(frozen=True)
class Received:
    """One request as the stub server got it."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    raw: bytes = b""
    body: Any = field(default=None)  # the JSON body, None when there was none or it was not JSON

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def received(server: Any) -> list[Received]:
    """The requests `server` (an HTTPServer whose handler is a `ChatStubHandler`) has received, in order."""
    with _RECORD_LOCK:
        return list(getattr(server, "received", []))


def chat_completion(content: str, prompt_tokens: int = 1, completion_tokens: int = 1) -> bytes:
    """The body of a chat.completion reply whose assistant message is `content`."""
    return json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "judge",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens}}).encode()


class ChatStubHandler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def handle_one_request(self) -> None:
        wire = self.rfile
        try:
            super().handle_one_request()
        finally:
            self.rfile = wire  # a kept-alive connection reads its next request from the socket again

    def parse_request(self) -> bool:
        """Parse the request line and headers, then record the request on the server (`received`); the body is
        read here and put back as `self.rfile`, so a subclass reads it as it would have."""
        if not super().parse_request():
            return False
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if length > 0:
            self.rfile = io.BufferedReader(io.BytesIO(raw))  # type: ignore[assignment]
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, raw, body)
        with _RECORD_LOCK:
            if not hasattr(self.server, "received"):
                self.server.received = []  # type: ignore[attr-defined]
            self.server.received.append(record)  # type: ignore[attr-defined]
        return True

    def _send(self, code: int, payload: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


# ---------------------------------------------------------------- a strict OpenAI-schema endpoint


def openai_error(message: str, param: str | None = None, code: str | None = None) -> bytes:
    """OpenAI's error body (type invalid_request_error)."""
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": param,
                                 "code": code}}).encode()


class StrictOpenAIStub:
    """An endpoint that checks requests the way OpenAI's chat-completions API does where this project can get it
    wrong: a top-level field outside OpenAI's request schema is answered 400 "Unknown parameter" (OpenAI's wording,
    `param` and `code` set), as is a malformed `response_format`. `GET /v1/models` lists `models` owned by
    "openai". `reply(body) -> str` gives the assistant's content of an accepted request. `bodies` keeps every POST
    body, `refused` the ones answered 400; `gets` counts GETs; `received()` every request whole (`Received`).
    `strict=False`: any field is taken (a vLLM server's leniency), every request still recorded.

    The accepted fields are OpenAI's, read from the `openai` package's request types (the SDK OpenAI publishes
    with its API), not from the project: the backend under test filters with its own code."""

    def __init__(self, reply, models: tuple[str, ...] = ("gpt-4.1-mini",), strict: bool = True) -> None:
        import threading
        import typing
        from http.server import ThreadingHTTPServer

        from openai.types.chat import completion_create_params

        allowed = set(typing.get_type_hints(completion_create_params.CompletionCreateParamsNonStreaming))
        self.bodies: list[dict] = []
        self.refused: list[dict] = []
        self.gets = 0
        stub = self

        class Handler(ChatStubHandler):
            def do_GET(self) -> None:
                stub.gets += 1
                if self.path.rstrip("/").endswith("/models"):
                    data = [{"id": m, "object": "model", "created": 0, "owned_by": "openai"} for m in models]
                    self._send(200, json.dumps({"object": "list", "data": data}).encode())
                else:
                    self._send(404, openai_error(f"Invalid URL (GET {self.path})"))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.bodies.append(body)
                unknown = sorted(set(body) - allowed) if strict else []
                problem = None
                if unknown:
                    problem = openai_error(f"Unknown parameter: '{unknown[0]}'.", unknown[0], "unknown_parameter")
                elif "response_format" in body:
                    rf = body["response_format"]
                    if rf.get("type") == "json_schema" and not isinstance(rf.get("json_schema", {}).get("name"), str):
                        problem = openai_error("Missing required parameter: 'response_format.json_schema.name'.",
                                               "response_format.json_schema.name", "missing_required_parameter")
                if problem is not None:
                    stub.refused.append(body)
                    self._send(400, problem)
                    return
                self._send(200, chat_completion(reply(body)))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # a short poll: close() (shutdown) returns within 0.05 s, not serve_forever's default 0.5 s
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def schema_names(self) -> list[str]:
        """`response_format.json_schema.name` of every accepted request ("-" when it had none)."""
        return [(b.get("response_format") or {}).get("json_schema", {}).get("name", "-")
                for b in self.bodies if b not in self.refused]

    def received(self) -> list[Received]:
        """Every request this endpoint got (GETs too), with its path and headers."""
        return received(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
