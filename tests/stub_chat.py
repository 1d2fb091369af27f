"""A fault-injection stand-in for an OpenAI-compatible chat endpoint (the only place the tests stub a server: to
send 500s, timeouts and garbage a real vLLM server would not). Subclass `ChatStubHandler`, implement `do_POST`."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


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

    def _send(self, code: int, payload: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
