"""The console's only link to the daemon: a subscription read in a thread, buffered for the UI.

Every record is made visible (`visible_tree`) as it arrives, off the UI thread, so no widget can
show a control character an agent sent. Strings are made one line each, unless the reader asks for
`multiline` (the detail's stream, which shows the first line of a text and its size).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from ..runtime.client import Client, DaemonError
from ..paths import Paths
from ..supervisor.visible import visible, visible_tree

BUFFER = 20_000  # updates kept between two drains; older ones are dropped (the store has them all)


class Feed:
    """Reads `subscribe` updates on a background thread into a bounded buffer the UI drains on a timer."""

    def __init__(self, paths: Paths, *, sessions: list[str] | None = None, events: bool = False,
                 autostart: bool = True, multiline: bool = False) -> None:
        self.paths = paths
        self.only = sessions
        self.events = events
        self.autostart = autostart
        self.multiline = multiline
        self.buffer: deque[dict[str, Any]] = deque(maxlen=BUFFER)
        self.sessions: list[dict[str, Any]] = []
        self.daemon: dict[str, Any] = {}  # what the daemon could not write or keep (a full disk), kept current
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
            self.sessions = visible_tree(list(first.get("sessions") or []), multiline=self.multiline)
            self.daemon = visible_tree(first.get("daemon") or {})
            self._ready.set()
            for message in updates:
                kind = message.get("kind")
                if kind == "daemon":
                    self.daemon = visible_tree(message.get("data") or {})
                elif kind == "cut":  # the daemon ended the subscription: say why
                    self.error = visible(str(message.get("reason")))
                    return
                else:
                    self.buffer.append(visible_tree(message, multiline=self.multiline))
            self.error = "the daemon closed the connection"
        except (DaemonError, OSError, ValueError) as exc:
            self.error = visible(str(exc))
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
        """One request on a connection of its own (the feed's is busy streaming); its reply made visible."""
        return request(self.paths, op, multiline=self.multiline, **fields)

    def close(self) -> None:
        self._closed = True
        if self._client is not None:
            self._client.close()


def request(paths: Paths, op: str, *, multiline: bool = False, **fields: Any) -> Any:
    """One request to the daemon on a connection of its own; every string of the reply made visible."""
    with Client.connect(paths, autostart=False, name="console") as client:
        return visible_tree(client.request(op, **fields), multiline=multiline)
