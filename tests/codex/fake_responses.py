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
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.model_server import ModelHandler, RepliesInOrder, sse

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


# ---- scripts more than one test plays ------------------------------------------

def gated_until(fake: FakeResponses, word: str, cmd: str) -> Callable[[dict[str, Any]], Reply]:
    """The first request fails (with `escalation.failures_at_top=1` a gate opens and holds the next call), then
    the model runs `cmd` until a request carries `word`, and ends."""
    def script(body: dict[str, Any]) -> Reply:
        if len(fake.requests()) == 1:
            return http_error(500)
        if any(word in t for t in user_texts(body)):
            return say("Understood. Done.")
        return run(cmd)
    return script


def stepping_until(word: str) -> Callable[[dict[str, Any]], Reply]:
    """A model that runs a short command after another until a request carries `word` (steered in), then ends."""
    def script(body: dict[str, Any]) -> Reply:
        if any(word in t for t in user_texts(body)):
            return say("Steered. Done.")
        return run(f"sleep 0.4; echo step-{calls_made(body)}")
    return script


# ---- the server ------------------------------------------------------------------

class FakeResponses(RepliesInOrder[Reply]):
    """The fake API. `play(script)` sets what the model answers; `bodies` is what it was sent (POST /v1/responses
    bodies, in order)."""

    thread_name = "fake-responses"

    def __init__(self, *, max_replies: int = 60) -> None:
        super().__init__(_Handler, max_replies=max_replies, limit=say(LIMIT_TEXT), exhausted=say(EXHAUSTED_TEXT),
                         failed=http_error(500))
        self._ids = itertools.count(1)
        self.cached_share = 0.0  # of each request's input tokens, the share reported read from the cache
        self.headers: dict[str, str] = {}  # added to every answer (e.g. Codex's rate-limit headers)
        self.usages: list[dict[str, Any]] = []  # the usage of every answer, in order

    @property
    def url(self) -> str:
        """The provider's base_url (Codex appends /responses)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def sent_texts(self, body: dict[str, Any]) -> list[str]:
        return user_texts(body) + [str(o.get("output", "")) for o in outputs(body)]

    # -- answering
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
        cached = int(in_tokens * self.cached_share)
        usage = {"input_tokens": in_tokens, "input_tokens_details": {"cached_tokens": cached},
                 "output_tokens": out_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": in_tokens + out_tokens}
        self.usages.append(usage)
        yield {"type": "response.completed", "response": {"id": response_id, "usage": usage}}


class _Handler(ModelHandler):
    fake: FakeResponses

    def do_GET(self) -> None:
        self.fake.other.append(f"GET {self.path}")
        self.send_json(404, {"error": {"message": f"the fake API has no GET {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        raw = self.read_body()
        if self.path.split("?", 1)[0].rstrip("/") != "/v1/responses":
            self.fake.other.append(f"POST {self.path}")
            self.send_json(404, {"error": {"message": f"the fake API has no POST {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self.send_json(400, {"error": {"message": "the body is not a JSON object",
                                           "type": "invalid_request_error"}})
            return
        reply = self.fake.reply_for(body)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self.send_json(reply.status, {"error": {"message": f"fake server error {reply.status}",
                                                    "type": "server_error", "code": None}})
            return
        self.send_events((sse(event, event["type"]) for event in self.fake.events(reply, len(raw))),
                         self.fake.headers)


@pytest.fixture
def fake_model() -> Iterator[FakeResponses]:
    """A started fake Responses API for one test; script it with `fake_model.play(...)`."""
    with FakeResponses() as server:
        yield server
