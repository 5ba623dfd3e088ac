"""A scripted fake of the Anthropic Messages API: stdlib HTTP on 127.0.0.1, a free port, one thread.

Tests script the model turn by turn and point the `anthropic` SDK (or the Claude Code CLI) at it
with `ANTHROPIC_BASE_URL`. It follows the rules in shared research `protocols.md` section 4:

- every response has a unique message id (Claude Code merges assistant messages that share one);
- the turn is chosen from the request itself (a list script is indexed by the number of assistant
  messages in the request's history), never from a global counter;
- every run is bounded: past `max_turns` answered requests, or `max_seconds` after start, the
  server answers a final `end_turn` text, so a looping client always gets a way out;
- `stream: true` is answered with the server-sent events of section 4.3, otherwise plain JSON
  with a content-length;
- `x-api-key` and `Authorization: Bearer` are both accepted and neither is checked;
- other endpoints get sensible answers instead of a crash: `count_tokens`, `GET /v1/models`,
  `HEAD` (200), and a JSON `not_found_error` for the rest.

Every request is recorded (with the credentials redacted), so a test can assert which model id
was used and what the client sent back (tool results, injected user text).

    def test_x(fake_api):
        fake_api.play([call("bash", {"command": "ls"}), say("done")])
        env = fake_api.env()   # ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY=test
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Self

import pytest

from tests.support.model_server import FakeModelServer, ModelHandler, Script, sse

LIMIT_TEXT = "(fake server) turn limit reached; stopping."
EXHAUSTED_TEXT = "(fake server) the script has no more turns; done."
FAKE_MODELS = ("claude-haiku-5-5", "claude-sonnet-5-5", "claude-opus-5-5")
_REDACTED = {"authorization", "x-api-key"}


@dataclass
class Turn:
    """One scripted model answer: content blocks and a stop reason, or an HTTP error."""

    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = "end_turn"
    status: int = 200
    error_type: str | None = None
    error_message: str = ""
    delay: float = 0.0  # seconds before answering (ended early when the server stops)


def say(text: str) -> Turn:
    """A final answer (`end_turn`)."""
    return Turn([{"type": "text", "text": text}], "end_turn")


def call(name: str, input: dict[str, Any], *, text: str | None = None) -> Turn:
    """One tool_use block (its id is filled in per response), optionally after some text."""
    return calls((name, input), text=text)


def calls(*pairs: tuple[str, dict[str, Any]], text: str | None = None) -> Turn:
    """Several tool_use blocks in one assistant turn."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "name": name, "input": input} for name, input in pairs]
    return Turn(blocks, "tool_use")


def hang(seconds: float = 60.0, then: Turn | None = None) -> Turn:
    """No answer for `seconds` (a client's timeout must end the wait), then `then` (default: a short text)."""
    turn = then or say("(fake server) late answer")
    return Turn(turn.content, turn.stop_reason, turn.status, turn.error_type, turn.error_message, delay=seconds)


def fail(status: int = 529, kind: str = "overloaded_error", message: str = "Overloaded") -> Turn:
    """An HTTP error with the API's JSON error body."""
    return Turn(status=status, error_type=kind, error_message=message)


# ---- reading a request's history --------------------------------------------

def assistant_turns(body: dict[str, Any]) -> int:
    """How many assistant messages the request's history holds: the index of the turn asked for."""
    return sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def tool_results(body: dict[str, Any], *, last_only: bool = False) -> list[dict[str, Any]]:
    """The tool_result blocks in the user messages (only the last user message with `last_only`)."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    if last_only:
        users = users[-1:]
    return [b for m in users for b in _blocks(m) if b.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    """A tool_result's content as text (a string, or the text of its text blocks)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def user_texts(body: dict[str, Any]) -> list[str]:
    """Every text the user side said (plain string content and text blocks, not tool results)."""
    return [b.get("text", "") for m in body.get("messages") or [] if m.get("role") == "user"
            for b in _blocks(m) if b.get("type") == "text"]


# ---- the server ----------------------------------------------------------------

@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeAnthropic(FakeModelServer):
    """The fake API. `play(script)` sets what the model answers; `requests` is what it was sent."""

    thread_name = "fake-anthropic"

    def __init__(self, script: Script[Turn] = (), *, max_turns: int = 40, max_seconds: float = 60.0,
                 side: Callable[[dict[str, Any]], bool] | None = None) -> None:
        super().__init__(_Handler)
        self.script: Script[Turn] = script
        self.max_turns = max_turns
        self.max_seconds = max_seconds
        self.side = side  # requests that are not the conversation (e.g. a CLI's title request): "ok"
        self.requests: list[Recorded] = []
        self._ids = itertools.count(1)
        self._started = time.monotonic()
        self.stopping = threading.Event()  # ends every `hang` at once

    # -- setup
    def play(self, script: Script[Turn], *, max_turns: int | None = None) -> FakeAnthropic:
        self.script = script
        if max_turns is not None:
            self.max_turns = max_turns
        return self

    def start(self) -> Self:
        self._started = time.monotonic()
        return super().start()

    def stop(self) -> None:
        self.stopping.set()
        super().stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """Environment for a client: this server as the base URL and a dummy key."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": "test"}

    # -- what was sent
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The bodies of every conversation request (POST /v1/messages), in order."""
        with self._lock:
            return [r.body for r in self.requests if r.method == "POST" and _route(r.path) == "/v1/messages"
                    and isinstance(r.body, dict) and not (self.side and self.side(r.body))]

    def models(self) -> list[str]:
        """The model id of every conversation request, in order."""
        return [str(b.get("model")) for b in self.messages]

    # -- answering
    def record(self, method: str, path: str, headers: dict[str, str], body: Any) -> None:
        safe = {k.lower(): ("<redacted>" if k.lower() in _REDACTED else v) for k, v in headers.items()}
        with self._lock:
            self.requests.append(Recorded(method, path, safe, body))

    def turn_for(self, body: dict[str, Any]) -> Turn:
        """The scripted turn for one conversation request, within the turn and time bounds."""
        if self.side and self.side(body):
            return say("ok")
        with self._lock:
            self.answered += 1
            over = self.answered > self.max_turns or time.monotonic() - self._started > self.max_seconds
        if over:
            return say(LIMIT_TEXT)
        return self.scripted(self.script, body, assistant_turns(body), exhausted=say(EXHAUSTED_TEXT),
                             failed=lambda exc: fail(500, "api_error", f"fake script failed: {exc}"))

    def message(self, body: dict[str, Any], turn: Turn, raw_size: int) -> dict[str, Any]:
        """A complete Message object for a turn: unique ids, usage from the sizes."""
        n = next(self._ids)
        content = []
        for i, block in enumerate(turn.content):
            block = dict(block)
            if block["type"] == "tool_use" and not block.get("id"):
                block["id"] = f"toolu_fake{n:04d}_{i}"
            content.append(block)
        return {"id": f"msg_fake{n:04d}_{uuid.uuid4().hex[:10]}", "type": "message", "role": "assistant",
                "model": str(body.get("model") or FAKE_MODELS[0]), "content": content,
                "stop_reason": turn.stop_reason, "stop_sequence": None,
                "usage": {"input_tokens": max(1, raw_size // 4),
                          "output_tokens": max(1, len(json.dumps(content)) // 4),
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def _route(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/")


def sse_events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The streaming event sequence (protocols.md 4.3) that assembles into `message`."""
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**message["usage"], "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            empty = {**block, "input": {}}
            text = json.dumps(block["input"])
            pieces = [text[: len(text) // 2], text[len(text) // 2:]]
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        else:
            empty = {**block, "text": ""}
            text = block.get("text", "")
            deltas = [{"type": "text_delta", "text": p} for p in (text[: len(text) // 2], text[len(text) // 2:])]
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": message["usage"]["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}


class _Handler(ModelHandler):
    fake: FakeAnthropic

    def _json(self, status: int, obj: Any) -> None:
        self.send_json(status, obj, {"request-id": f"req_fake_{uuid.uuid4().hex[:12]}"})

    def _error(self, status: int, kind: str, message: str) -> None:
        self._json(status, {"type": "error", "error": {"type": kind, "message": message}})

    def _receive(self) -> tuple[bytes, Any]:
        raw = self.read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self.fake.record(self.command, self.path, dict(self.headers.items()), body)
        return raw, body

    def do_HEAD(self) -> None:
        self.fake.record("HEAD", self.path, dict(self.headers.items()), None)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._receive()
        route = _route(self.path)
        if route == "/v1/models":
            data = [{"type": "model", "id": m, "display_name": m, "created_at": "2026-01-01T00:00:00Z"}
                    for m in FAKE_MODELS]
            self._json(200, {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]})
        elif route.startswith("/v1/models/"):
            model = route.rsplit("/", 1)[1]
            self._json(200, {"type": "model", "id": model, "display_name": model,
                             "created_at": "2026-01-01T00:00:00Z"})
        else:
            self._error(404, "not_found_error", f"the fake API has no GET {route}")

    def do_POST(self) -> None:
        raw, body = self._receive()
        route = _route(self.path)
        if route == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": max(1, len(raw) // 4)})
            return
        if route != "/v1/messages":
            self._error(404, "not_found_error", f"the fake API has no POST {route}")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._error(400, "invalid_request_error", "messages: field required")
            return
        turn = self.fake.turn_for(body)
        if turn.delay and self.fake.stopping.wait(turn.delay):
            return  # stopped while hanging: no answer at all
        if turn.error_type:
            self._error(turn.status, turn.error_type, turn.error_message)
            return
        message = self.fake.message(body, turn, len(raw))
        if not body.get("stream"):
            self._json(200, message)
            return
        self.send_events(sse(event, name) for name, event in sse_events(message))

    def do_DELETE(self) -> None:
        self._receive()
        self._error(404, "not_found_error", f"the fake API has no DELETE {_route(self.path)}")

    do_PUT = do_PATCH = do_DELETE


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropic]:
    """A started fake API for one test; script it with `fake_api.play([...])`."""
    with FakeAnthropic() as server:
        yield server
