"""The daemon's record routing: every record a session produces, queued for the store and broadcast to subscribers;
changed snapshots published, and ended sessions released once their final snapshot is stored."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from ..supervisor.events import Event
from .audit import AuditLog, text_size
from .broadcast import Broadcaster
from .daemon_health import DaemonHealth
from .records import Recorder
from .registry import SessionRegistry, session_row
from .store import EventRow

PUBLISH_SECONDS = 0.25


def _verdict_row(data: dict[str, Any]) -> dict[str, Any]:
    return {"seq": data.get("seq"), "ts": data.get("ts"), "action": data.get("action"), "rule": data.get("rule"),
            "reason": data.get("reason"), "message": data.get("message"), "termination": data.get("termination"),
            "target": data.get("target"), "gate_id": data.get("gate_id"), "evidence": data.get("evidence") or {}}


class AlertFeed(Protocol):
    """Where records that may need a person go (alerting.py)."""

    def record(self, kind: str, session_id: str, data: dict[str, Any]) -> None: ...
    def ended(self, snap: dict[str, Any]) -> None: ...


class Router:
    """Records to the store and to subscribers; snapshots published; ended sessions released."""

    def __init__(self, recorder: Recorder, registry: SessionRegistry, broadcaster: Broadcaster, audit: AuditLog,
                 alerts: AlertFeed, health: DaemonHealth, *, clock: Callable[[], float]) -> None:
        self.recorder = recorder
        self.registry = registry
        self.broadcaster = broadcaster
        self.subscribers = broadcaster.subscribers  # the broadcaster's own list, read once per chunk of events
        self.audit = audit
        self.alerts = alerts
        self.health = health
        self.clock = clock
        self.dirty: set[str] = set()
        self.releasing: dict[str, int] = {}  # ended session -> the mark of its final snapshot in its lane
        self._last_publish = 0.0
        self._last_health: dict[str, Any] = {}
        self.spent: Callable[[str, dict[str, Any]], None] = lambda sid, data: None  # a usage that cost: the ledger
        recorder.on_requeue_sessions = self._requeue

    def sink(self, kind: str, session_id: str, data: dict[str, Any], size: int = 0, at: float | None = None) -> None:
        """Every record a session produces: queued for the store, broadcast to subscribers.
        `size` is the bytes the record came from (an event's line), for the store's byte budget; `at` when the
        engine took an event (the time a session rebuilt from the store gives it), else when it was seen."""
        if kind == "session":
            self.mark(session_id)
            return
        if kind in ("event", "log"):
            if kind == "log":
                row = {"session_id": session_id, "seq": None, "ts": data.get("ts"), "kind": "log", "data": data}
            else:
                row = {"session_id": session_id, "seq": data.get("seq"), "ts": self.clock() if at is None else at,
                       "kind": data.get("type"), "data": data}
            if not self.recorder.add("events", session_id, row, size or text_size(data)):
                self.mark(session_id)  # its dropped_events count moved
                return
            self.broadcaster.broadcast(kind, session_id, data, is_event=True)
            return
        if kind == "action":
            self.audit.row(session_id, data)
            return
        if kind == "position":  # how far a kept agent's output is stored: for the store and its keeper only
            self.recorder.add("positions", session_id, {"session_id": session_id, **data})
            return
        if kind == "spend":  # a usage event's dollars, for the daemon's budgets (its event is stored as any)
            self.spent(session_id, data)
            return
        if kind == "verdict":
            self.recorder.add("verdicts", session_id, {"session_id": session_id, **_verdict_row(data)})
            self.alerts.record(kind, session_id, data)
        elif kind == "gate":
            self.recorder.add("gates", session_id, {"session_id": session_id, "gate_id": data["id"],
                                                    **{k: v for k, v in data.items() if k != "id"}})
            self.alerts.record(kind, session_id, data)
        elif kind == "spill":
            self.recorder.add("spills", session_id, {"session_id": session_id, **data})
        self.broadcaster.broadcast(kind, session_id, data, is_event=False)

    def sink_rows(self, session_id: str, rows: list[EventRow], events: list[Event], size: int) -> None:
        """Events whose records are JSON already (`typed.stored_json`), a session's rows of one chunk, read from
        `size` bytes: queued as they are, in one entry; subscribers get each record as `sink` sends it."""
        if not self.recorder.add_rows(session_id, rows, size):
            self.mark(session_id)  # its dropped_events count moved
        elif self.subscribers:
            broadcast = self.broadcaster.broadcast
            for event in events:
                record = event.to_dict()
                record["seq"] = event.seq
                broadcast("event", session_id, record, is_event=True)

    def mark(self, session_id: str) -> None:
        """A session changed: publish its snapshot on the next round."""
        self.dirty.add(session_id)
        self.recorder.poke()

    def _requeue(self, session_ids: list[str]) -> None:
        """Snapshots that could not be written are published (and written) again on the next round."""
        for sid in session_ids:
            if sid in self.registry.sessions:
                self.mark(sid)

    def before_flush(self) -> None:
        """Each flusher round: publish changed snapshots (at most every PUBLISH_SECONDS), then release
        the ended sessions whose final snapshot is stored."""
        now = time.monotonic()
        if self.dirty and now - self._last_publish >= PUBLISH_SECONDS:
            self._last_publish = now
            self.publish_dirty()
        elif self.dirty:
            self.recorder.poke()  # publish on a later round, at most PUBLISH_SECONDS apart
        self.release_ended()
        health = self.health()
        if health != self._last_health:  # what could not be written changed: every console says so
            self._last_health = health
            self.broadcaster.to_all("daemon", health)

    def publish_now(self, session_id: str) -> None:
        """Queue one session's row at once (a kept agent is started only once its session is stored: a daemon
        that dies meanwhile must find it)."""
        session = self.registry.sessions.get(session_id)
        if session is not None:
            self.recorder.add("sessions", session_id, session_row(self.registry.live_snapshot(session)))

    def publish_dirty(self) -> None:
        sessions = self.registry.sessions
        for session_id in list(self.dirty):
            session = sessions.get(session_id)
            if session is None:
                continue
            snap = self.registry.live_snapshot(session)
            self.recorder.add("sessions", session_id, session_row(snap))
            self.broadcaster.broadcast("session", session_id, snap, is_event=False)
            if session.final:
                self.releasing[session_id] = self.recorder.mark(session_id)
                self.alerts.ended(snap)
        self.dirty.clear()

    def release_ended(self) -> None:
        """Ended sessions leave memory once their final snapshot is stored (see SessionRegistry.release)."""
        for sid, mark in list(self.releasing.items()):
            written = self.recorder.written(sid, mark)
            if written is None or sid in self.dirty:
                continue
            del self.releasing[sid]
            if not written:
                self.mark(sid)  # the write failed: try again with the next round
                continue
            self.recorder.forget(sid)
            self.registry.release(sid)

    async def flush(self) -> None:
        """Write what is pending, so a reader sees every record before it."""
        await self.recorder.flush()
