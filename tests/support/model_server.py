"""What the fake model servers share: stdlib HTTP on 127.0.0.1 and a free port, one thread serving it, and
a script that says what the model answers.

Each fake (the Anthropic Messages API, the OpenAI Responses API, the Gemini API) extends `FakeModelServer`
with its wire format: its `handler` class answers the requests, and its replies are chosen from the test's
script by `scripted`. `stop()` closes the listening socket: later connections are refused (a dead model
server).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Self, TypeVar

ReplyT = TypeVar("ReplyT")  # what one fake answers a request with (its Turn or Reply)
# what the model answers: a list (one answer per request, in order) or a function of the request's body
Script = Sequence[ReplyT] | Callable[[dict[str, Any]], ReplyT]


class ModelHandler(BaseHTTPRequestHandler):
    """One HTTP request to a fake: reading its body, answering JSON or a stream of server-sent events."""

    fake: Any  # the server this handler answers for (set on the class `start` builds)
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read what the fake recorded instead

    def read_body(self) -> bytes:
        """The request's body, sent with a content-length or chunked."""
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

    def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events: Iterable[bytes], headers: dict[str, str] | None = None) -> None:
        """A 200 answer of server-sent events (each already framed, see `sse`), with `headers` added; the
        connection closes after."""
        self.send_response(200)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in events:
            self.wfile.write(event)
        self.wfile.flush()


def sse(data: Any, name: str | None = None, eol: str = "\n") -> bytes:
    """One server-sent event: an `event:` line when it has a name, its JSON `data:` line, a blank line."""
    head = f"event: {name}{eol}" if name else ""
    return f"{head}data: {json.dumps(data)}{eol}{eol}".encode()


class FakeModelServer:
    """A fake model API served by a thread; `start()` it, point the client at its port, `stop()` it."""

    thread_name: ClassVar[str] = "fake-model"

    def __init__(self, handler: type[ModelHandler]) -> None:
        self.handler = handler  # answers each request, with this server as its `fake`
        self.errors: list[str] = []  # exceptions raised by a script function
        self.answered = 0  # requests the script answered
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._port = 0

    def start(self) -> Self:
        """Listen (on the port of an earlier start, if any) and serve on a thread of its own."""
        handler = type("Handler", (self.handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        self._httpd.daemon_threads = True
        self._port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name=self.thread_name, daemon=True).start()
        return self

    def stop(self) -> None:
        """Close the listening socket: later connections are refused (a dead model server)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        """Started for the block, stopped after it."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._port, "start() the server first"
        return self._port

    def scripted(self, script: Script[ReplyT], body: dict[str, Any], index: int, *, exhausted: ReplyT,
                 failed: Callable[[Exception], ReplyT]) -> ReplyT:
        """The script's answer to one request: a script function's answer (a function that raised is answered
        `failed(exc)`, its error kept in `errors` for the test to see), else the list's answer number `index`,
        `exhausted` past its end."""
        if callable(script):
            try:
                return script(body)
            except Exception as exc:  # noqa: BLE001 - a broken test script: answer, and let the test see it
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return failed(exc)
        return script[index] if index < len(script) else exhausted


class RepliesInOrder(FakeModelServer, ABC, Generic[ReplyT]):
    """A fake whose script answers the requests in the order they come (or the same reply to each, `repeat`),
    bounded: past `max_replies` answered requests it answers `limit`, so a looping client always gets a way
    out. Every request's body is kept in `bodies`."""

    def __init__(self, handler: type[ModelHandler], *, max_replies: int, limit: ReplyT, exhausted: ReplyT,
                 failed: ReplyT) -> None:
        super().__init__(handler)
        self.script: Script[ReplyT] = ()
        self.repeat = False
        self.max_replies = max_replies
        self.bodies: list[dict[str, Any]] = []  # the requests' bodies, in order
        self.other: list[str] = []  # any request it has no answer for: "METHOD path"
        self._limit, self._exhausted, self._failed = limit, exhausted, failed

    def play(self, script: Script[ReplyT] | ReplyT, *, repeat: bool = False, max_replies: int | None = None) -> Self:
        """Set the script; `repeat=True` with one reply answers it to every request (a looping model)."""
        self.script = script if callable(script) or isinstance(script, Sequence) else [script]
        self.repeat = repeat
        if max_replies is not None:
            self.max_replies = max_replies
        return self

    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.bodies)

    def received(self, text: str) -> list[int]:
        """Indexes of the requests in which the model was sent `text` (user text or what a call returned)."""
        return [n for n, body in enumerate(self.requests()) if any(text in t for t in self.sent_texts(body))]

    @abstractmethod
    def sent_texts(self, body: dict[str, Any]) -> list[str]:
        """The texts a request sends the model: its user texts and what its calls returned."""

    def reply_for(self, body: dict[str, Any]) -> ReplyT:
        """The answer to the next request, kept in `bodies`."""
        with self._lock:
            self.bodies.append(body)
            index = self.answered
            self.answered += 1
        if index >= self.max_replies:
            return self._limit
        return self.scripted(self.script, body, 0 if self.repeat else index, exhausted=self._exhausted,
                             failed=lambda exc: self._failed)
