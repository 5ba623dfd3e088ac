"""A scripted fake of the Gemini API for the Gemini CLI: stdlib HTTP on 127.0.0.1, a free port.

Gemini POSTs `/v1beta/models/{model}:streamGenerateContent?alt=sse` for the chat model and reads
server-sent events; it also asks `:generateContent` for small JSON answers (the model router, the
next-speaker check, the loop check) and may call `:countTokens` (shared research `acp_agents.md`).
Tests script the chat model reply by reply:

    fake = FakeGemini().start()
    fake.play([run("echo hi"), say("done")])        # one reply per chat request, in order
    fake.play(run("echo hi"), repeat=True)          # a looping model: the same call forever
    fake.play(lambda body: say("ok"))               # chosen from the request itself
    fake.play([http_error(500)])                    # the model server fails

Every run is bounded: past `max_replies` answered chat requests the server answers a final
message, so a looping client always gets a way out. Every chat request body is recorded, so a
test can assert what the model received (`function_responses`, `user_texts`, `received`).
`stop()` closes the socket: a dead model server.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.model_server import ModelHandler, RepliesInOrder, sse

LIMIT_TEXT = "(fake server) reply limit reached; stopping."
EXHAUSTED_TEXT = "(fake server) the script has no more replies; done."
SHELL = "run_shell_command"


@dataclass(frozen=True)
class Reply:
    """One scripted model answer: a function call, a final message, or an HTTP error."""

    tool: str | None = None
    args: dict[str, Any] | None = None
    text: str | None = None
    status: int = 200
    delay: float = 0.0  # seconds to wait before answering (a slow model)


def run(command: str) -> Reply:
    """A function call `run_shell_command {"command": command}`."""
    return Reply(tool=SHELL, args={"command": command})


def call(tool: str, **args: Any) -> Reply:
    """A function call of any tool (`read_file`, `write_file`, ...)."""
    return Reply(tool=tool, args=args)


def say(text: str) -> Reply:
    """A final model message: the turn ends."""
    return Reply(text=text)


def http_error(status: int = 500) -> Reply:
    """An HTTP error with the API's JSON error body."""
    return Reply(status=status)


# ---- reading a request ---------------------------------------------------------

def contents(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's `contents` (the whole conversation Gemini sent)."""
    value = body.get("contents")
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def _parts(body: dict[str, Any], role: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for content in contents(body):
        if content.get("role") == role and isinstance(content.get("parts"), list):
            out.extend(p for p in content["parts"] if isinstance(p, dict))
    return out


def function_responses(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `functionResponse` parts: what each call returned to the model (`{name, response, id?}`)."""
    return [p["functionResponse"] for p in _parts(body, "user") if isinstance(p.get("functionResponse"), dict)]


def function_calls(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's own `functionCall` parts in this request's history."""
    return [p["functionCall"] for p in _parts(body, "model") if isinstance(p.get("functionCall"), dict)]


def user_texts(body: dict[str, Any]) -> list[str]:
    """Every text part of a user turn in the request (the prompts, including any reason sent as text)."""
    return [str(p["text"]) for p in _parts(body, "user") if "text" in p]


def calls_made(body: dict[str, Any]) -> int:
    """How many function calls the model made so far in this request's history."""
    return len(function_calls(body))


# ---- the small JSON answers of the utility calls -------------------------------

def _utility_answer(body: dict[str, Any]) -> dict[str, Any]:
    """A JSON object fitting the schema a `:generateContent` request asks for: route to the flash
    model, give the turn back to the user, never see a loop (loop judging is loopwarden's job);
    any other number is 1 (the router's complexity score must be at least 1)."""
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    known: dict[str, Any] = {"model_choice": "flash", "complexity_score": 1, "next_speaker": "user",
                             "unproductive_state_confidence": 0.0}
    answer: dict[str, Any] = {}
    for name, spec in (props or {}).items():
        if name in known:
            answer[name] = known[name]
        elif isinstance(spec, dict) and str(spec.get("type", "")).lower() in ("number", "integer"):
            answer[name] = 1
        elif isinstance(spec, dict) and str(spec.get("type", "")).lower() == "boolean":
            answer[name] = False
        else:
            answer[name] = "(fake server)"
    return answer


# ---- the server ------------------------------------------------------------------

class FakeGemini(RepliesInOrder[Reply]):
    """The fake API. `play(script)` sets what the chat model answers; `bodies` is what it was sent
    (streamGenerateContent bodies, in order)."""

    thread_name = "fake-gemini"

    def __init__(self, *, max_replies: int = 60) -> None:
        super().__init__(_Handler, max_replies=max_replies, limit=say(LIMIT_TEXT), exhausted=say(EXHAUSTED_TEXT),
                         failed=http_error(500))
        self.models: list[str] = []  # the model named in each of those requests' paths
        self.utility: list[str] = []  # generateContent/countTokens requests: "method model"
        self.usages: list[tuple[str, dict[str, Any]]] = []  # each streamed reply's model and usageMetadata

    @property
    def url(self) -> str:
        """GOOGLE_GEMINI_BASE_URL (Gemini appends /v1beta/models/...)."""
        return f"http://127.0.0.1:{self.port}"

    def sent_texts(self, body: dict[str, Any]) -> list[str]:
        return user_texts(body) + [json.dumps(r.get("response")) for r in function_responses(body)]

    @staticmethod
    def chunk(reply: Reply, raw_size: int) -> dict[str, Any]:
        """The one SSE chunk of a reply: a candidate with a functionCall or a text part, and usage."""
        if reply.tool is not None:
            part: dict[str, Any] = {"functionCall": {"name": reply.tool, "args": reply.args or {}}}
            out_tokens = max(1, len(json.dumps(part)) // 4)
        else:
            part = {"text": reply.text or ""}
            out_tokens = max(1, len(reply.text or "") // 4)
        in_tokens = max(1, raw_size // 4)
        return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": in_tokens, "candidatesTokenCount": out_tokens,
                                  "totalTokenCount": in_tokens + out_tokens},
                "modelVersion": "fake"}


class _Handler(ModelHandler):
    fake: FakeGemini

    def _not_found(self, method: str) -> None:
        self.fake.other.append(f"{method} {self.path}")
        self.send_json(404, {"error": {"code": 404, "message": f"the fake API has no {method} {self.path}",
                                       "status": "NOT_FOUND"}})

    def do_GET(self) -> None:
        self._not_found("GET")

    def do_POST(self) -> None:
        raw = self.read_body()
        path = self.path.split("?", 1)[0]
        prefix = "/v1beta/models/"
        if not path.startswith(prefix) or ":" not in path:
            self._not_found("POST")
            return
        model, method = path[len(prefix):].rsplit(":", 1)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self.send_json(400, {"error": {"code": 400, "message": "the body is not a JSON object",
                                           "status": "INVALID_ARGUMENT"}})
            return
        if method == "countTokens":
            self.fake.utility.append(f"countTokens {model}")
            self.send_json(200, {"totalTokens": max(1, len(raw) // 4)})
        elif method == "generateContent":
            self.fake.utility.append(f"generateContent {model}")
            text = json.dumps(_utility_answer(body))
            self.send_json(200, {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                                 "finishReason": "STOP", "index": 0}],
                                 "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1,
                                                   "totalTokenCount": 2}})
        elif method == "streamGenerateContent":
            self._stream(body, model, len(raw))
        else:
            self._not_found("POST")

    def _stream(self, body: dict[str, Any], model: str, raw_size: int) -> None:
        self.fake.models.append(model)
        reply = self.fake.reply_for(body)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            status = "INTERNAL" if reply.status >= 500 else "INVALID_ARGUMENT"
            message = f"fake server error {reply.status}"
            self.send_json(reply.status, {"error": {"code": reply.status, "message": message, "status": status}})
            return
        chunk = self.fake.chunk(reply, raw_size)
        self.fake.usages.append((model, chunk["usageMetadata"]))
        self.send_events([sse(chunk, eol="\r\n")])


@pytest.fixture
def fake_gemini() -> Iterator[FakeGemini]:
    """A started fake Gemini API for one test; script it with `fake_gemini.play(...)`."""
    with FakeGemini() as server:
        yield server
