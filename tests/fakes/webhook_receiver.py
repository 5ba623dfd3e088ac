"""A JSON webhook receiver on loopback that records what arrives: what apprise's json:// URLs post to.

Stdlib HTTP on 127.0.0.1 and a free port, a thread per request. It answers 200, or as told:
`fail_next(n)` answers the next n requests 500 (then 200 again), `mode = "fail"` answers every one
500, `mode = "hang"` holds every request without an answer until `release()` (or close), `mode =
"trickle"` answers with a header that never ends, a byte each 0.2 s (no socket timeout sees it). Every
request that arrived is recorded with its arrival time (time.time(), comparable with the daemon's
timestamps), its path, headers and decoded JSON body, whatever it was answered.

    with WebhookReceiver() as hook:
        url = hook.url("alerts")             # json://127.0.0.1:PORT/alerts
        hook.wait_for(lambda r: "s3:g1" in r.message)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.waiting import wait_for


@dataclass
class Received:
    at: float
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    answered: int = 0  # the status it was answered with (0: held, never answered)

    @property
    def title(self) -> str:
        return str(self.body.get("title", ""))

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))


@dataclass
class WebhookReceiver:
    mode: str = "ok"  # ok, fail, hang, trickle
    received: list[Received] = field(default_factory=list)
    _failures_left: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _released: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": raw.decode(errors="replace")}
                record = Received(time.time(), self.path, dict(self.headers), body if isinstance(body, dict) else {})
                status = receiver._answer(record)
                if status == 0:
                    receiver._released.wait(60)
                    return  # never answered: the connection is closed under the client
                if status == -1:
                    self._trickle()
                    return
                record.answered = status
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def _trickle(self) -> None:
                try:
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                    while not receiver._released.wait(0.2):
                        self.wfile.write(b"z")
                        self.wfile.flush()
                except OSError:
                    pass  # the client went away

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _answer(self, record: Received) -> int:
        with self._lock:
            self.received.append(record)
            if self._failures_left:
                self._failures_left -= 1
                return 500
            return {"ok": 200, "fail": 500, "hang": 0, "trickle": -1}[self.mode]

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str = "alerts", scheme: str = "json") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/{path}"

    def fail_next(self, count: int) -> None:
        with self._lock:
            self._failures_left = count

    def release(self) -> None:
        self._released.set()

    def messages(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.received if path is None or r.path.lstrip("/") == path.lstrip("/")]

    def wait_for(self, match: Callable[[Received], bool], timeout: float = 20.0, count: int = 1,
                 path: str | None = None) -> list[Received]:
        """Poll until `count` received requests match (returned), or fail after `timeout` seconds."""
        found: list[Received] = []

        def enough() -> bool:
            found[:] = [r for r in self.messages(path) if match(r)]
            return len(found) >= count

        wait_for(enough, timeout, lambda: f"{count} webhook requests; got {[r.title for r in self.messages()]}")
        return found

    def close(self) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    try:
        yield receiver
    finally:
        receiver.close()
