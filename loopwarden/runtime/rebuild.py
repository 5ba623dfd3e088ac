"""A session's engine state rebuilt from what the store holds for it, exactly as the live session left it.

The store's events table is the engine's input in order: each event at the time the engine took it, and the
operator's inputs (runtime/inputs.py) as log records between them. The verdicts table adds what came with time
alone: a tick that gave a verdict (at the verdict's time), a gate that expired (at its decision's time), and an
end decided outside the rules (a kill, the daemon's stop, a sampled resource), settled as stored. Rebuilding
stores nothing and acts on no verdict; it reads a page at a time, so its memory is what SessionHealth keeps."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from ..supervisor.config import Config
from ..supervisor.health import TERMINATED, SessionHealth
from ..supervisor.stored import stored_event, stored_verdict
from ..supervisor.verdicts import Action
from . import inputs
from .store import Store

PAGE: Final = 1000  # rows read at once
TICKED: Final = frozenset({"runtime", "stall"})  # the rules a tick gives verdicts for (gate expiry aside)


class RebuildError(ValueError):
    """A session the store cannot rebuild (no such session)."""


@dataclass(slots=True)
class Rebuilt:
    """A rebuilt session's engine, and what it was fed."""

    health: SessionHealth
    events: int = 0  # events judged again
    inputs: int = 0  # operator inputs given again
    ticks: int = 0  # ticks and stored ends given again
    unreadable: int = 0  # stored records no event could come from (cut by the store)
    dropped: int = 0  # events the daemon could not store (the session's dropped_events)


def rebuilt_health(store: Store, sid: str, config: Config) -> SessionHealth:
    """Session `sid`'s engine, rebuilt from `store` under its launch `config`."""
    return rebuild(store, sid, config).health


def rebuild(store: Store, sid: str, config: Config, *, page: int = PAGE) -> Rebuilt:
    """`rebuilt_health`, with counts of what it was fed. Raises RebuildError for an unknown session."""
    row = store.session(sid)
    if row is None:
        raise RebuildError(f"no session {sid!r} in {store.path}")
    health = SessionHealth(config, started_at=row.get("created_at"))
    if row.get("started_at") is not None:
        health.started(float(row["started_at"]))
    out = Rebuilt(health, dropped=int(row.get("dropped_events") or 0))
    timed = _Timed(_timed_inputs(store, sid, page))
    observe = health.observe
    for record in pages(store.events, sid, page):
        ts = record["ts"] or 0.0
        if timed.head is not None and timed.head[0] < ts:
            out.ticks += timed.until(health, ts)
        data = record["data"]
        if type(data) is not dict:
            out.unreadable += 1
            continue
        if record["kind"] == "log":
            given = data.get(inputs.INPUT)
            if isinstance(given, dict):
                inputs.apply(health, given, ts)
                out.inputs += 1
            continue
        event = stored_event(data, record.get("seq"))
        if event is None:
            out.unreadable += 1
            continue
        observe(event, ts)
        out.events += 1
    out.ticks += timed.until(health, float("inf"))
    return out


def pages(read: Any, sid: str, page: int = PAGE) -> Iterator[dict[str, Any]]:
    """Every row of a session in one of the store's paged tables, oldest first, `page` rows at a time."""
    after = 0
    while True:
        rows = read(sid, after, page)
        yield from rows
        if len(rows) < page:
            return
        after = rows[-1]["id"]


def _timed_inputs(store: Store, sid: str, page: int) -> Iterator[tuple[float, dict[str, Any] | None]]:
    """What came with time alone, oldest first: (time, None) for a tick (one that gave a verdict, or expired a
    gate), (time, verdicts row) for an end decided outside the rules; at one time, the tick first."""
    expired = sorted(float(g["decided_at"]) for g in store.gates(sid, status="expired") if g.get("decided_at"))
    ticks: Iterator[tuple[float, dict[str, Any] | None]] = ((at, None) for at in expired)
    return heapq.merge(_stored_times(store, sid, page), ticks, key=lambda item: (item[0], item[1] is not None))


def _stored_times(store: Store, sid: str, page: int) -> Iterator[tuple[float, dict[str, Any] | None]]:
    for verdict in pages(store.verdicts, sid, page):
        if verdict.get("ts") is None:
            continue
        if verdict["rule"] in TICKED and not verdict.get("seq"):
            yield float(verdict["ts"]), None
        elif verdict["action"] == Action.TERMINATE:
            yield float(verdict["ts"]), verdict


class _Timed:
    """The timed inputs, given to the engine up to a time."""

    def __init__(self, source: Iterator[tuple[float, dict[str, Any] | None]]) -> None:
        self.source = source
        self.head = next(source, None)

    def until(self, health: SessionHealth, ts: float) -> int:
        """Give `health` every timed input before `ts`; how many."""
        given = 0
        while self.head is not None and self.head[0] < ts:
            at, verdict = self.head
            if verdict is None:
                health.tick(at)
            elif health.state != TERMINATED:  # an end the engine reached itself is not settled twice
                health.end_as_stored(stored_verdict(verdict), at)
            given += 1
            self.head = next(self.source, None)
        return given
