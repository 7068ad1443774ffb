"""A real, local OpenAI-compatible HTTP server for tests: POST /v1/chat/completions.

Scripted per test through `behaviour`:

- "ok": `reply` as JSON, or (`reply` None, the default) a valid tone plan for the request's
  own menu (bench.corpora.answers.valid_plan): what a model that follows the request answers;
- "slow": the same, after waiting `delay` seconds (released early by `stop`);
- "http500" / "http429": an OpenAI-style error body with that status;
- "malformed": prose instead of JSON;
- "refusal": a message with `refusal` set and no content;
- a callable taking the request body (dict) and returning the assistant content.

GET /v1/models lists `models` (what `dueflow check` asks; counted in `model_lists`).

It records every request body in `requests` (and headers, lower-cased, in `headers`), and the
highest number of requests in flight at once in `max_in_flight`. Set `barrier`
to a threading.Barrier(n) to hold requests until n are in flight together, and
`hold` to keep them in flight a moment longer once released.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.corpora.answers import valid_plan

Behaviour = str | Callable[[dict[str, Any]], str]
BEHAVIOURS = ("ok", "slow", "http500", "http429", "malformed", "refusal")

class OpenAIStub:
    def __init__(self) -> None:
        self.behaviour: Behaviour = "ok"
        self.reply: dict[str, Any] | None = None
        self.delay = 5.0
        self.usage = (120, 40)  # prompt_tokens, completion_tokens of every reply
        self.barrier: threading.Barrier | None = None
        self.hold = 0.0  # seconds a request stays in flight after the barrier released it
        self.requests: list[dict[str, Any]] = []
        self.models: list[str] = ["gpt-4o-mini", "local-model"]
        self.model_lists = 0
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.stub = self  # type: ignore[attr-defined]
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="openai-stub", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAIStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes "slow" handlers
        if self.barrier is not None:
            self.barrier.abort()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Status, JSON body and extra headers of the response to one request."""
        behaviour = self.behaviour
        if self.barrier is not None:
            try:
                self.barrier.wait(timeout=5)
            except threading.BrokenBarrierError:
                return 503, _error("barrier broken: too few concurrent requests", "server_error"), {}
            # Stay in flight a little longer: a request beyond the client's bound,
            # sent together with these, is counted in max_in_flight meanwhile.
            self._stopping.wait(self.hold)
        if behaviour == "http500":
            return 500, _error("The server had an error while processing your request.", "server_error"), {}
        if behaviour == "http429":
            return 429, _error("Rate limit reached for requests.", "requests", "rate_limit_exceeded"), {
                "Retry-After": "1"}
        if behaviour == "slow":
            self._stopping.wait(self.delay)
        if behaviour == "refusal":
            message = {"role": "assistant", "content": None,
                       "refusal": "I'm sorry, but I can't help with that request."}
        else:
            if callable(behaviour):
                content = behaviour(body)
            elif behaviour == "malformed":
                content = "Sure! Here is a friendly paragraph: we value your business."
            elif behaviour in ("ok", "slow"):
                content = json.dumps(self.reply if self.reply is not None else valid_plan(body))
            else:
                raise ValueError(f"unknown behaviour {behaviour!r}; use one of {BEHAVIOURS} or a callable")
            message = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
        prompt, completion = self.usage
        return 200, {
            "id": f"chatcmpl-stub{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
            "system_fingerprint": "fp_stub",
        }, {}


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the openai client expects

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        stub: OpenAIStub = self.server.stub  # type: ignore[attr-defined]
        if self.path.rstrip("/") != "/v1/models":
            self._send(404, _error(f"no route {self.path}", "invalid_request_error"), {})
            return
        with stub.lock:
            stub.model_lists += 1
        self._send(200, {"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "stub"} for name in stub.models]}, {})

    def do_POST(self) -> None:
        stub: OpenAIStub = self.server.stub  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, _error(f"no route {self.path}", "invalid_request_error"), {})
            return
        body = json.loads(raw)
        with stub.lock:
            stub.requests.append(body)
            stub.headers.append({k.lower(): v for k, v in self.headers.items()})
            stub.in_flight += 1
            stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
        try:
            status, payload, headers = stub.answer(body)
        finally:
            # Leave before replying: once the client has the reply it may send its
            # next request, which must not count as overlapping with this one.
            with stub.lock:
                stub.in_flight -= 1
        self._send(status, payload, headers)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to answer


@contextmanager
def openai_stub() -> Iterator[OpenAIStub]:
    """A started stub, stopped on exit."""
    stub = OpenAIStub().start()
    try:
        yield stub
    finally:
        stub.stop()
