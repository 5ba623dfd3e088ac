"""What a live session tells the daemon, in order: its events' rows, its other records, and that it changed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

from ...supervisor.events import Event
from ...supervisor.health import SessionHealth
from ...supervisor.verdicts import Action, Verdict
from .. import inputs
from ..store import EventRow
from .spec import RowsSink, Sink

PROGRESS_SECONDS: Final = 1.0  # a session whose lines only moved its counts (no verdict): published at most this often
# verdicts that tell what a loop did (a rewind's guidance and a restart's summary quote the last one)
EVIDENCE: Final = frozenset({Action.NUDGE, Action.BLOCK, Action.GATE, Action.FORCE_NEXT, Action.ESCALATE})


class Journal:
    """The session's side of the daemon's record path: events, verdicts and the gates they opened, logs, spills,
    and publishes (the daemon builds the snapshot then). The rows of the lines judged since the last flush wait
    here and go in one entry per chunk, before anything that must follow them: another record, a line for the
    agent (write ahead: it waits for them to be stored), an await."""

    def __init__(self, sid: str, health: SessionHealth, sink: Sink, sink_rows: RowsSink | None,
                 clock: Callable[[], float]) -> None:
        self.sid = sid
        self.health = health
        self._sink = sink
        self.sink_rows = sink_rows  # None: every event goes to the sink as a record
        self.clock = clock
        self._rows: list[EventRow] = []  # the rows of the lines judged since the last flush
        self._row_events: list[Event] = []  # ... their events
        self._rows_size = 0  # ... the bytes they were read from
        self.noteworthy = False  # a line judged since the last publish had a verdict or a hello (see progress)
        self._progressed = 0.0  # loop time of the last publish for progress
        self.progress_timer: asyncio.TimerHandle | None = None
        self.changes = 0  # bumped by every publish: what a cached snapshot was built from may have moved
        self.last_intervention: Verdict | None = None  # the last verdict short of an end: a loop's evidence

    def row(self, event: Event, now: float, data: bytes, size: int) -> None:
        """An event's row, its JSON `data` encoded already, stored with the chunk's other rows (flush_rows)."""
        self._rows.append((self.sid, event.seq, now, event.kind, data.decode()))
        self._row_events.append(event)
        self._rows_size += size or len(data)

    def sink(self, kind: str, data: dict[str, Any], size: int = 0, at: float | None = None) -> None:
        """Any other record of the session, after the rows of the lines judged before it (`at`: when the engine
        took the event it is)."""
        self.flush_rows()
        if at is None:
            self._sink(kind, self.sid, data, size)
        else:
            self._sink(kind, self.sid, data, size, at)

    def took(self, given: dict[str, Any], now: float) -> None:
        """An operator's input the engine took at `now` (runtime/inputs.py), in the session's log."""
        self.sink("log", inputs.record(given, now))

    def record(self, verdicts: list[Verdict], now: float | None = None) -> None:
        """Store and broadcast verdicts, and the gates they opened; `now`: when the engine gave them (the time a
        session rebuilt from the store gives it what gave them)."""
        if now is None:
            now = self.clock()
        for verdict in verdicts:
            self.sink("verdict", {**verdict.to_dict(), "ts": now})
            if verdict.action in EVIDENCE and verdict.rule != "rewind":
                self.last_intervention = verdict
            if verdict.gate_id:
                gate = self.health.gate(verdict.gate_id)
                if gate:
                    self.sink("gate", gate.to_dict())

    def flush_rows(self) -> None:
        """The rows of the lines judged since the last call, queued for the store in one entry (once per chunk:
        one call and one entry instead of one per event). Nothing when there are none."""
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        events, self._row_events = self._row_events, []
        size, self._rows_size = self._rows_size, 0
        assert self.sink_rows is not None  # rows are made only with it
        self.sink_rows(self.sid, rows, events, size)

    def progress(self) -> None:
        """Lines were judged: their rows queued for the store, and the session published now when one had a
        verdict (or a hello), else at most every PROGRESS_SECONDS (a timer publishes the last of it). Counts
        moving alone were published per chunk, so 200 sessions at 20 events/s had their snapshots built and
        stored 800 times a second. While the timer is set, the counts' publish is due already (called once
        per chunk)."""
        self.flush_rows()
        if self.progress_timer is not None and not self.noteworthy:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.noteworthy or now - self._progressed >= PROGRESS_SECONDS:
            self.noteworthy = False
            self._progressed = now
            self.publish()
        elif self.progress_timer is None:
            self.progress_timer = loop.call_at(self._progressed + PROGRESS_SECONDS, self._progress_due)

    def _progress_due(self) -> None:
        self.progress_timer = None
        self._progressed = asyncio.get_running_loop().time()
        self.publish()

    def stop_progress(self) -> None:
        """The session's final publish tells everything: the timer's would come after it."""
        if self.progress_timer is not None:
            self.progress_timer.cancel()
            self.progress_timer = None

    def publish(self) -> None:
        """Tell the daemon this session changed; it builds the snapshot when it publishes."""
        self.changes += 1  # the cached snapshot is built again
        self.sink("session", {})

    def resources_moved(self) -> None:
        """Only the sampled numbers moved: the session is published, its cached snapshot kept (the snapshot fills
        them in fresh), so 200 agents starting up are not rebuilt whole every sampler round."""
        self.sink("session", {})

    def report(self, text: str, *, error: bool = False) -> None:
        """A line from loopwarden in the session's log (shown by an attached run and by `logs`); an `error` one
        says something failed (the console draws only those in red)."""
        line = {"stream": "loopwarden", "text": text, "ts": self.clock()}
        self.sink("log", {**line, "level": "error"} if error else line)
