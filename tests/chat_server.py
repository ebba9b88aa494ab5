"""A tiny OpenAI-compatible ``/v1/chat/completions`` server on loopback, for tests.

It records every request (headers and JSON body) and answers from a queue of canned
answers; with the queue empty it echoes the last user message, with usage figures.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GATE_CAP_SECONDS = 120


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0
    # Held until the test sets it: a request in flight for as long as the test says.
    gate: threading.Event | None = None


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class ChatServer:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answers: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def answer(
        self,
        status: int = 200,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        delay_seconds: float = 0.0,
        gate: threading.Event | None = None,
    ) -> None:
        """Queue the answer to the next request (sent once ``gate`` is set, if given)."""
        self.answers.append(Answer(status, body, headers or {}, delay_seconds, gate))

    def _next(self, request: Received) -> Answer:
        with self._lock:
            self.received.append(request)
            if self.answers:
                return self.answers.popleft()
        return Answer(body=echo(request.body))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                answer = server._next(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                if answer.delay_seconds:
                    time.sleep(answer.delay_seconds)
                if answer.gate is not None:
                    # A cap, not a wait: the test sets the gate; a test that forgot fails.
                    answer.gate.wait(GATE_CAP_SECONDS)
                payload = json.dumps(answer.body or {}).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler

    @contextmanager
    def running(self) -> Iterator[ChatServer]:
        # serve_forever checks for shutdown once per poll interval (0.5 s by default):
        # every test using the server would wait that long at its end.
        thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()
            thread.join(timeout=10)


def echo(body: dict[str, Any]) -> dict[str, Any]:
    """An answer repeating the last user message, with usage counted in words."""
    messages = body.get("messages") or []
    last = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    prompt = sum(len(str(m.get("content", "")).split()) for m in messages)
    return completion(
        f"echo: {last}", prompt_tokens=prompt, completion_tokens=1 + len(last.split())
    )


def completion(
    text: str | None, *, prompt_tokens: int = 10, completion_tokens: int = 5, model: str = "fake-1"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
