"""A live session on the daemon's real record path and SQLite store, driven line by line and by its operator
controls on a clock moved by hand, and its state rebuilt from the store to compare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopwarden.paths import Paths
from loopwarden.runtime.daemon import Daemon
from loopwarden.runtime.rebuild import rebuilt_health
from loopwarden.runtime.session import LiveSession, SessionSpec
from loopwarden.runtime.registry import session_row
from loopwarden.runtime.store import Batch, Store
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import Config, load_config
from loopwarden.supervisor.state import health_state
from tests.agents.paced_flood import event_line
from tests.support.clock import Clock


class Recorded:
    """A native session whose every record goes through the daemon's router and recorder into its store."""

    def __init__(self, home: Path, config: Config | None = None) -> None:
        self.daemon = Daemon(Paths(runtime=home / "run", data=home / "data", cache=home / "cache"))
        (home / "data").mkdir(parents=True)
        assert self.daemon.recorder.open()
        self.clock = Clock(1_800_000_000.0)
        self.config = config or load_config(env={})
        self.session = LiveSession(SessionSpec(id="s1", name="t", command=["agent"], task="t1"), self.config,
                                   adapters()["native"](), sink=self.daemon.router.sink, clock=self.clock,
                                   records=self.daemon.recorder, sink_rows=self.daemon.router.sink_rows)
        self.session.health.started(self.clock())
        self.session.started_at = self.clock()
        self.stdout = self.session.reader.read_stdout()

    def line(self, text: str, step: float = 1.0) -> None:
        """One line of the agent's, `step` seconds after the last thing that happened."""
        self.clock.now += step
        self.stdout.data_received(text.encode() + b"\n")

    def store(self) -> Store:
        """The store with everything recorded so far written (and the session's row)."""
        timer = self.session.journal.progress_timer
        if timer is not None:
            timer.cancel()
            self.session.journal.progress_timer = None
        self.daemon.recorder.flush_now()
        store = self.daemon.recorder.store
        assert store is not None
        store.write(Batch(sessions_upsert=[{**session_row(self.session.snapshot()), "dropped_events": 0}]))
        return store

    def live_state(self) -> dict[str, Any]:
        return health_state(self.session.health)

    def rebuilt_state(self) -> dict[str, Any]:
        return health_state(rebuilt_health(self.store(), "s1", self.config))

    def close(self) -> None:
        self.daemon.recorder.close()


def differences(a: Any, b: Any, at: str = "") -> list[str]:
    """Where two states differ, as paths: what a failed comparison says."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(a.keys() | b.keys(), key=str)
                for d in differences(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{at}[{i}]")]
    return [] if a == b else [f"{at}: {a!r:.200} != {b!r:.200}"]


def store_flood(store: Store, sid: str, events: int, *, start: float = 1_800_000_000.0, batch: int = 5000) -> None:
    """A session of `events` stored rows of the flood agents' cycle (calls, results, messages, usage...), a
    tenth of a second apart, written as the daemon writes typed lines' rows."""
    store.write(Batch(sessions_upsert=[{"id": sid, "name": sid, "state": "running", "created_at": start,
                                        "started_at": start, "dropped_events": 0}]))
    for first in range(0, events, batch):
        rows: list[Any] = []
        for i in range(first, min(first + batch, events)):
            ts = start + 0.1 * (i + 1)
            line = event_line(i, ts)
            rows.append((sid, i + 1, ts, line[10:line.index('"', 10)], line[:-2] + f',"seq":{i + 1}}}'))
        store.write(Batch(events=rows))
