"""The daemon's record routing: every record a session produces, queued for the store and broadcast to subscribers."""

from __future__ import annotations

import os
import time
from typing import Any

from ..supervisor.events import Event
from ..supervisor.visible import visible
from .parts import DaemonParts
from .principal import Principal
from .records import AUDIT
from .store import EventRow
from .registry import _session_row
from .subscribers import encode

PUBLISH_SECONDS = 0.25


def _text_size(data: dict[str, Any]) -> int:
    """Bytes of a record's top-level text: what it costs in memory, roughly, when no line length is known."""
    return sum(len(v) for v in data.values() if isinstance(v, str))


def _verdict_row(data: dict[str, Any]) -> dict[str, Any]:
    return {"seq": data.get("seq"), "ts": data.get("ts"), "action": data.get("action"), "rule": data.get("rule"),
            "reason": data.get("reason"), "message": data.get("message"), "termination": data.get("termination"),
            "target": data.get("target"), "gate_id": data.get("gate_id"), "evidence": data.get("evidence") or {}}


class RecordRouting(DaemonParts):
    """Records to the store and to subscribers; snapshots published; the audit queued."""

    def _log(self, text: str) -> None:
        """One line in the daemon's log, agent text in it made visible (it cannot forge lines or drive a
        terminal); a failed write (a full disk) is counted, never raised."""
        try:
            os.write(2, f"{time.strftime('%Y-%m-%d %H:%M:%S')} {visible(text)}\n".encode("utf-8", "replace"))
        except OSError:
            self.log_errors += 1

    def sink(self, kind: str, session_id: str, data: dict[str, Any], size: int = 0) -> None:
        """Every record a session produces: queued for the store, broadcast to subscribers.
        `size` is the bytes the record came from (an event's line), for the store's byte budget."""
        if kind == "session":
            self._mark(session_id)
            return
        if kind in ("event", "log"):
            if kind == "log":
                row = {"session_id": session_id, "seq": None, "ts": data.get("ts"), "kind": "log", "data": data}
            else:
                row = {"session_id": session_id, "seq": data.get("seq"), "ts": self.clock(),  # when it was seen
                       "kind": data.get("type"), "data": data}
            if not self.recorder.add("events", session_id, row, size or _text_size(data)):
                self._mark(session_id)  # its dropped_events count moved
                return
            self._broadcast(kind, session_id, data, is_event=True)
            return
        if kind == "verdict":
            self.recorder.add("verdicts", session_id, {"session_id": session_id, **_verdict_row(data)})
            self._alert_record(kind, session_id, data)
        elif kind == "gate":
            self.recorder.add("gates", session_id, {"session_id": session_id, "gate_id": data["id"],
                                                    **{k: v for k, v in data.items() if k != "id"}})
            self._alert_record(kind, session_id, data)
        elif kind == "spill":
            self.recorder.add("spills", session_id, {"session_id": session_id, **data})
        elif kind == "action":
            self.recorder.add("actions", AUDIT, {"session_id": session_id, **data}, _text_size(data))
        self._broadcast(kind, session_id, data, is_event=False)

    def sink_rows(self, session_id: str, rows: list[EventRow], events: list[Event], size: int) -> None:
        """Events whose records are JSON already (`typed.stored_json`), a session's rows of one chunk, read from
        `size` bytes: queued as they are, in one entry; subscribers get each record as `sink` sends it."""
        if not self.recorder.add_rows(session_id, rows, size):
            self._mark(session_id)  # its dropped_events count moved
        elif self.subscribers:
            for event in events:
                record = event.to_dict()
                record["seq"] = event.seq
                self._broadcast("event", session_id, record, is_event=True)

    def _mark(self, session_id: str) -> None:
        """A session changed: publish its snapshot on the next round."""
        self.dirty.add(session_id)
        self.recorder.poke()

    def _requeue(self, session_ids: list[str]) -> None:
        """Snapshots that could not be written are published (and written) again on the next round."""
        for sid in session_ids:
            if sid in self.sessions:
                self._mark(sid)

    def _broadcast(self, kind: str, session_id: str, data: dict[str, Any], *, is_event: bool) -> None:
        message: bytes | None = None
        for sub in self.subscribers:
            if sub.wants(session_id, is_event):
                if message is None:
                    message, trouble = encode(kind, session_id, data)
                    if trouble:
                        self._unserialisable(kind, session_id, trouble)
                sub.offer(message)

    def _unserialisable(self, kind: str, session_id: str, trouble: str) -> None:
        """Count (and now and then log) a record that went out clipped; a session never hears of it."""
        self.unserialisable += 1
        if self.unserialisable == 1 or self.unserialisable % 1000 == 0:
            self._log(f"a {kind} record of session {session_id} could not be serialised ({trouble}); "
                      f"subscribers got a clipped copy ({self.unserialisable} so far)")

    def _before_flush(self) -> None:
        """Each flusher round: publish changed snapshots (at most every PUBLISH_SECONDS), then release
        the ended sessions whose final snapshot is stored."""
        now = time.monotonic()
        if self.dirty and now - self._last_publish >= PUBLISH_SECONDS:
            self._last_publish = now
            self._publish_dirty()
        elif self.dirty:
            self.recorder.poke()  # publish on a later round, at most PUBLISH_SECONDS apart
        self._release_ended()
        health = self._health()
        if health != self._last_health:  # what could not be written changed: every console says so
            self._last_health = health
            message, _ = encode("daemon", "", health)
            for sub in self.subscribers:
                sub.offer(message)

    def _health(self) -> dict[str, Any]:
        """What the daemon could not write or keep since it started (all zero on a good day)."""
        health = {"store": self.recorder.health.to_dict(), "dropped_events": sum(self.recorder.dropped.values()),
                  "log_errors": self.log_errors, "hook_sessions_refused": self.hook_refusals,
                  "spill": self.spill_ledger.health()}
        alerts = self._alert_health()
        if alerts is not None:
            health["alerts"] = alerts
        return health

    def _publish_dirty(self) -> None:
        for session_id in list(self.dirty):
            session = self.sessions.get(session_id)
            if session is None:
                continue
            snap = self._live_snapshot(session)
            self.recorder.add("sessions", session_id, _session_row(snap))
            self._broadcast("session", session_id, snap, is_event=False)
            if session.final:
                self.releasing[session_id] = self.recorder.mark(session_id)
                self._alert_ended(snap)
        self.dirty.clear()

    async def _flush(self) -> None:
        """Write what is pending, so a reader sees every record before it."""
        await self.recorder.flush()

    async def _durably(self, mark: int) -> bool:
        return await self.recorder.durable(AUDIT, mark)

    def _audit(self, who: Principal, session_id: str | None, action: str, target: str | None,
               note: str | None, outcome: str) -> int:
        """Queue an audit row; the mark to wait on (`_durably`) before saying it was done."""
        self.sink("action", session_id or "", {"ts": self.clock(), "actor": who.actor, "client": who.client,
                                                **who.audit_facts(), "action": action, "target": target,
                                                "note": note, "outcome": outcome})
        return self.recorder.mark(AUDIT)
