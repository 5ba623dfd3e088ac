"""The console's only link to the daemon: a subscription read in a thread, buffered for the UI."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from ..supervisor.client import Client, DaemonError
from ..supervisor.paths import Paths

BUFFER = 20_000  # updates kept between two drains; older ones are dropped (the store has them all)


class Feed:
    """Reads `subscribe` updates on a background thread into a bounded buffer the UI drains on a timer."""

    def __init__(self, paths: Paths, *, sessions: list[str] | None = None, events: bool = False,
                 autostart: bool = True) -> None:
        self.paths = paths
        self.only = sessions
        self.events = events
        self.autostart = autostart
        self.buffer: deque[dict[str, Any]] = deque(maxlen=BUFFER)
        self.sessions: list[dict[str, Any]] = []
        self.error: str | None = None
        self._client: Client | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._closed = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="loopwarden-feed", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float = 15.0) -> bool:
        return self._ready.wait(timeout)

    @property
    def ready(self) -> bool:
        """The first reply has arrived (or the connection failed, see `error`)."""
        return self._ready.is_set()

    def _run(self) -> None:
        try:
            self._client = Client.connect(self.paths, autostart=self.autostart, name="console")
            if self._closed:  # closed while connecting: do not stay subscribed in the background
                self._client.close()
                return
            first, updates = self._client.subscribe(self.only, events=self.events)
            self.sessions = list(first.get("sessions") or [])
            self._ready.set()
            for message in updates:
                self.buffer.append(message)
            self.error = "the daemon closed the connection"
        except (DaemonError, OSError, ValueError) as exc:
            self.error = str(exc)
        finally:
            self._ready.set()

    def drain(self) -> list[dict[str, Any]]:
        """Everything buffered since the last drain, oldest first."""
        out = []
        buffer = self.buffer
        while buffer:
            out.append(buffer.popleft())
        return out

    def request(self, op: str, **fields: Any) -> Any:
        """One request on a connection of its own (the feed's is busy streaming)."""
        with Client.connect(self.paths, autostart=False, name="console") as client:
            return client.request(op, **fields)

    def close(self) -> None:
        self._closed = True
        if self._client is not None:
            self._client.close()
