"""The console's only link to the daemon: a subscription read in a thread, buffered for the UI.

When the daemon goes away the feed says so (`error`, `attempt`) and subscribes again by itself,
a few seconds apart at most; a new subscription brings a fresh first snapshot (`take_sessions`).
A daemon that keeps its socket open but sends nothing, not even its heartbeat (stopped with
SIGSTOP, or stuck), counts as gone once the client's bound passes (runtime/client.py); the feed
then tries again on a new connection (never starting a daemon: one is there), which the daemon
answers as soon as it runs again.

Every record is made visible (`visible_tree`) as it arrives, off the UI thread, so no widget can
show a control character an agent sent. Strings are made one line each, unless the reader asks for
`multiline` (the detail's stream, which shows the first line of a text and its size).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from ..runtime.client import Client, DaemonError, DaemonTimeout
from ..paths import Paths
from ..supervisor.visible import visible, visible_tree

BUFFER = 20_000  # updates kept between two drains; older ones are dropped (the store has them all)
RETRY_SECONDS = (0.25, 0.5, 1.0, 2.0, 3.0)  # waits before each reconnection attempt; the last one repeats
HINT_AFTER = 8  # attempts (about 15 s) before the status line says how to start a daemon


class Feed:
    """Reads `subscribe` updates on a background thread into a bounded buffer the UI drains on a timer."""

    def __init__(self, paths: Paths, *, sessions: list[str] | None = None, events: bool = False,
                 autostart: bool = True, multiline: bool = False, client: str = "console") -> None:
        self.paths = paths
        self.client = client  # the kind the daemon's audit log names this console by ("web" when served)
        self.only = sessions
        self.events = events
        self.autostart = autostart
        self.multiline = multiline
        self.buffer: deque[dict[str, Any]] = deque(maxlen=BUFFER)
        self.sessions: list[dict[str, Any]] = []
        self.daemon: dict[str, Any] = {}  # what the daemon could not write or keep (a full disk), kept current
        self.error: str | None = None  # why the feed is not connected now (None: connected, or not yet tried)
        self.attempt = 0  # reconnection attempts since the link was lost
        self.generation = 0  # subscriptions made so far
        self.reconnected_at: float | None = None  # monotonic time of the last successful reconnection
        self._client: Client | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the first snapshot and the buffer change together on a reconnection
        self._fresh = False
        self._cut: str | None = None  # why the daemon ended the last subscription, when it said
        self._silent: str | None = None  # a few words when the daemon stopped answering (it is there, silent)
        self._closed = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="loopwarden-feed", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float = 15.0) -> bool:
        return self._ready.wait(timeout)

    @property
    def ready(self) -> bool:
        """The first reply has arrived (or the first connection failed, see `error`)."""
        return self._ready.is_set()

    @property
    def connected(self) -> bool:
        """Subscribed now: what is shown is live and requests reach the daemon it shows."""
        return self._ready.is_set() and self.error is None

    def take_sessions(self) -> list[dict[str, Any]] | None:
        """The sessions of the newest first snapshot, once (None: no new subscription since the last call)."""
        with self._lock:
            if not (self._fresh or self.sessions):
                return None
            sessions, self.sessions, self._fresh = self.sessions, [], False
            return sessions

    def _run(self) -> None:
        connected_once = False
        first = True
        while not self._closed:  # a daemon is started on the first attempt only: a failed start is not repeated
            why = self._follow(autostart=self.autostart and first)
            first = False
            connected_once = connected_once or self.generation > 0
            if self._closed:
                break
            self.attempt += 1
            if not connected_once:  # never reached: say why (no daemon, a bad socket path) and keep trying
                self.error = f"{why} — retrying (attempt {self.attempt})…"
            else:  # a cut says why; a daemon that went away needs few words (and, after a while, a hint)
                said = self._cut or self._silent
                hint = "  ('loopwarden serve' starts one)" if self.attempt >= HINT_AFTER and not said else ""
                self.error = f"{said or 'daemon gone'} — reconnecting (attempt {self.attempt})…{hint}"
            self._ready.set()
            self._stop.wait(RETRY_SECONDS[min(self.attempt, len(RETRY_SECONDS)) - 1])
        self._ready.set()

    def _follow(self, *, autostart: bool) -> str:
        """Subscribe and read updates until the link ends; the reason it ended, in a few words."""
        self._cut = self._silent = None
        try:
            client = self._client = self._connect(autostart)
            if self._closed:  # closed while connecting: do not stay subscribed in the background
                client.close()
                return "closed"
            first, updates = client.subscribe(self.only, events=self.events)
            with self._lock:
                self.buffer.clear()  # updates from before the gap are older than this snapshot
                self.sessions = visible_tree(list(first.get("sessions") or []), multiline=self.multiline)
                self.daemon = visible_tree(first.get("daemon") or {})
                self._fresh = True
                self.generation += 1
                if self.attempt:
                    self.reconnected_at = time.monotonic()
                self.attempt, self.error = 0, None
            self._ready.set()
            for message in updates:
                kind = message.get("kind")
                if kind == "daemon":
                    self.daemon = visible_tree(message.get("data") or {})
                elif kind == "cut":  # the daemon ended the subscription: say why
                    self._cut = visible(f"daemon: {message.get('reason')}")
                    return self._cut
                else:
                    self.buffer.append(visible_tree(message, multiline=self.multiline))
            return "it closed the connection"
        except DaemonTimeout as exc:  # there, but silent: its own words ("pid 4242 is stopped: kill -CONT 4242")
            self._silent = visible(exc.short)
            return self._silent
        except (DaemonError, OSError, ValueError) as exc:
            return visible(str(exc))
        finally:
            if self._client is not None:
                self._client.close()

    def _connect(self, autostart: bool) -> Client:
        """The subscription's connection (a remote host's feed first brings its forwarded socket up)."""
        return Client.connect(self.paths, autostart=autostart, name=self.client)

    def drain(self) -> list[dict[str, Any]]:
        """Everything buffered since the last drain, oldest first."""
        out = []
        buffer = self.buffer
        while buffer:
            out.append(buffer.popleft())
        return out

    def request(self, op: str, **fields: Any) -> Any:
        """One request on a connection of its own (the feed's is busy streaming); its reply made visible."""
        return request(self.paths, op, multiline=self.multiline, client=self.client, **fields)

    def close(self) -> None:
        self._closed = True
        self._stop.set()
        if self._client is not None:
            self._client.close()


def request(paths: Paths, op: str, *, multiline: bool = False, client: str = "console", **fields: Any) -> Any:
    """One request to the daemon on a connection of its own; every string of the reply made visible."""
    with Client.connect(paths, autostart=False, name=client) as link:
        return visible_tree(link.request(op, **fields), multiline=multiline)
