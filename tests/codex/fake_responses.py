"""A scripted fake of the OpenAI Responses API for the Codex CLI: stdlib HTTP on 127.0.0.1, a free port.

Codex POSTs `/v1/responses` with `stream: true` and reads server-sent events (shared research
`codex_app_server.md`, "The fake model"). Tests script the model reply by reply:

    fake = FakeResponses().start()
    fake.play([run("echo hi"), say("done")])        # one reply per request, in order
    fake.play(run("ls"), repeat=True)               # a looping model: the same call forever
    fake.play(lambda body: say("ok"))               # chosen from the request itself
    fake.play([http_error(500)])                    # the model server fails

Every response and call has a unique id. Every run is bounded: past `max_replies` answered
requests the server answers a final message, so a looping client always gets a way out. Every
request body is recorded, so a test can assert what the model received (`outputs`, `user_texts`).
`stop()` closes the socket: a dead model server.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

LIMIT_TEXT = "(fake server) reply limit reached; stopping."
EXHAUSTED_TEXT = "(fake server) the script has no more replies; done."


@dataclass(frozen=True)
class Reply:
    """One scripted model answer: an `exec_command` call, a final message, or an HTTP error."""

    cmd: str | None = None
    text: str | None = None
    yield_ms: int | None = None  # exec_command's yield_time_ms: past it the command goes on in the background
    patch: str | None = None  # an apply_patch (a freeform custom tool) call with this patch
    status: int = 200
    delay: float = 0.0  # seconds to wait before answering (a slow model)


def run(cmd: str, *, yield_ms: int | None = None) -> Reply:
    """A function call `exec_command {"cmd": cmd}` (with `yield_time_ms` when given)."""
    return Reply(cmd=cmd, yield_ms=yield_ms)


def patch(text: str) -> Reply:
    """A custom tool call `apply_patch` with a patch (`*** Begin Patch` ... `*** End Patch`)."""
    return Reply(patch=text)


def add_file(path: str, *lines: str) -> Reply:
    """An apply_patch call that adds a file with these lines."""
    body = "".join(f"+{line}\n" for line in lines)
    return patch(f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n")


def say(text: str) -> Reply:
    """A final assistant message: the turn ends."""
    return Reply(text=text)


def http_error(status: int = 500) -> Reply:
    """An HTTP error with the API's JSON error body."""
    return Reply(status=status)


Script = Sequence[Reply] | Callable[[dict[str, Any]], Reply]


# ---- reading a request ---------------------------------------------------------

def items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's `input` items (the whole conversation Codex sent)."""
    value = body.get("input")
    return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []


def outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `function_call_output` (and `custom_tool_call_output`) items: what each call returned to the model."""
    return [i for i in items(body) if i.get("type") in ("function_call_output", "custom_tool_call_output")]


def user_texts(body: dict[str, Any]) -> list[str]:
    """Every text of a user message in the request (the prompt, steering, injected text)."""
    out: list[str] = []
    for item in items(body):
        if item.get("type") == "message" and item.get("role") == "user":
            content = item.get("content")
            blocks = [{"text": content}] if isinstance(content, str) else content or []
            out.extend(str(b.get("text", "")) for b in blocks if isinstance(b, dict))
    return out


def calls_made(body: dict[str, Any]) -> int:
    """How many function calls the model made so far in this request's history."""
    return sum(1 for i in items(body) if i.get("type") in ("function_call", "custom_tool_call"))


# ---- the server ------------------------------------------------------------------

class FakeResponses:
    """The fake API. `play(script)` sets what the model answers; `bodies` is what it was sent."""

    def __init__(self, *, max_replies: int = 60) -> None:
        self.script: Script = ()
        self.repeat = False
        self.max_replies = max_replies
        self.bodies: list[dict[str, Any]] = []  # POST /v1/responses bodies, in order
        self.other: list[str] = []  # any other request: "METHOD path"
        self.errors: list[str] = []  # exceptions raised by a script function
        self.answered = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._port = 0

    def play(self, script: Script | Reply, *, repeat: bool = False, max_replies: int | None = None) -> FakeResponses:
        """Set the script; `repeat=True` with one Reply answers it to every request (a looping model)."""
        self.script = [script] if isinstance(script, Reply) else script
        self.repeat = repeat
        if max_replies is not None:
            self.max_replies = max_replies
        return self

    def start(self) -> FakeResponses:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        self._httpd.daemon_threads = True
        self._port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fake-responses", daemon=True).start()
        return self

    def stop(self) -> None:
        """Close the listening socket: later connections are refused (a dead model server)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def url(self) -> str:
        """The provider's base_url (Codex appends /responses)."""
        assert self._port, "start() the server first"
        return f"http://127.0.0.1:{self._port}/v1"

    # -- what was sent
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.bodies)

    def received(self, text: str) -> list[int]:
        """Indexes of the requests in which the model was sent `text` (user text or a call's output)."""
        out = []
        for n, body in enumerate(self.requests()):
            texts = user_texts(body) + [str(o.get("output", "")) for o in outputs(body)]
            if any(text in t for t in texts):
                out.append(n)
        return out

    # -- answering
    def reply_for(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.bodies.append(body)
            index = self.answered
            self.answered += 1
        if index >= self.max_replies:
            return say(LIMIT_TEXT)
        script = self.script
        if callable(script):
            try:
                return script(body)
            except Exception as exc:  # noqa: BLE001 - a broken test script: answer, and let the test see it
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return http_error(500)
        if self.repeat and script:
            return script[0]
        return script[index] if index < len(script) else say(EXHAUSTED_TEXT)

    def events(self, reply: Reply, raw_size: int) -> Iterator[dict[str, Any]]:
        """The SSE events of one reply, in the order Codex expects."""
        n = next(self._ids)
        response_id = f"resp_fake{n:04d}"
        yield {"type": "response.created", "response": {"id": response_id}}
        if reply.patch is not None:
            item = {"type": "custom_tool_call", "id": f"ctc_fake{n:04d}", "call_id": f"call_fake{n:04d}",
                    "name": "apply_patch", "input": reply.patch, "status": "completed"}
            yield {"type": "response.output_item.added", "output_index": 0, "item": {**item, "input": ""}}
            yield {"type": "response.custom_tool_call_input.delta", "output_index": 0, "item_id": item["id"],
                   "delta": reply.patch}
            yield {"type": "response.output_item.done", "output_index": 0, "item": item}
            out_tokens = max(1, len(reply.patch) // 4)
        elif reply.cmd is not None:
            args: dict[str, Any] = {"cmd": reply.cmd}
            if reply.yield_ms is not None:
                args["yield_time_ms"] = reply.yield_ms
            arguments = json.dumps(args)
            item = {"type": "function_call", "id": f"fc_fake{n:04d}", "call_id": f"call_fake{n:04d}",
                    "name": "exec_command", "arguments": arguments}
            yield {"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": ""}}
            yield {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": item["id"],
                   "delta": arguments}
            yield {"type": "response.output_item.done", "output_index": 0, "item": item}
            out_tokens = max(1, len(arguments) // 4)
        else:
            text = reply.text or ""
            item = {"type": "message", "id": f"msg_fake{n:04d}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}
            yield {"type": "response.output_item.added", "output_index": 0,
                   "item": {**item, "content": [], "status": "in_progress"}}
            yield {"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                   "item_id": item["id"], "delta": text}
            yield {"type": "response.output_item.done", "output_index": 0, "item": item}
            out_tokens = max(1, len(text) // 4)
        in_tokens = max(1, raw_size // 4)
        usage = {"input_tokens": in_tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": out_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": in_tokens + out_tokens}
        yield {"type": "response.completed", "response": {"id": response_id, "usage": usage}}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeResponses
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read `fake.bodies` instead

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if not size:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.fake.other.append(f"GET {self.path}")
        self._json(404, {"error": {"message": f"the fake API has no GET {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        raw = self._read_body()
        if self.path.split("?", 1)[0].rstrip("/") != "/v1/responses":
            self.fake.other.append(f"POST {self.path}")
            self._json(404, {"error": {"message": f"the fake API has no POST {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._json(400, {"error": {"message": "the body is not a JSON object", "type": "invalid_request_error"}})
            return
        reply = self.fake.reply_for(body)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._json(reply.status, {"error": {"message": f"fake server error {reply.status}",
                                                "type": "server_error", "code": None}})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in self.fake.events(reply, len(raw)):
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()


@pytest.fixture
def fake_model() -> Iterator[FakeResponses]:
    """A started fake Responses API for one test; script it with `fake_model.play(...)`."""
    server = FakeResponses().start()
    try:
        yield server
    finally:
        server.stop()
