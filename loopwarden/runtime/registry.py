"""The daemon's session registry: ids, names, live and recently ended sessions, their snapshots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from ..supervisor.verdicts import SessionState
from .contract import Supervised
from .history import EndedSessions
from .records import Recorder
from .requests import NAME_CHARS, RequestError
from .restarts import Restartable, Restartables
from .store import Store

RECENT_BYTES = 4 << 20  # snapshots of ended sessions kept in memory (the store has every one)
NAMES_SHOWN = 8  # sessions an ambiguous name's error lists


class UnknownSession(RequestError):
    """No session has this id or name."""


def _id_number(sid: str) -> int:
    return int(sid[1:]) if sid[:1] == "s" and sid[1:].isdigit() else 0


_SESSION_COLUMNS = ("id", "name", "adapter", "command", "cwd", "env_keys", "preset", "state", "created_at",
                    "started_at", "ended_at", "pid", "exit_code", "termination", "termination_text",
                    "dropped_events", "handshake", "config", "conversation", "task")


def session_row(snap: dict[str, Any]) -> dict[str, Any]:
    row = {k: snap.get(k) for k in _SESSION_COLUMNS}
    row["snapshot"] = snap
    return row


def row_snapshot(row: dict[str, Any]) -> dict[str, Any]:
    snap = row.get("snapshot")
    if isinstance(snap, dict):
        snap = dict(snap)
        for key in ("state", "termination", "termination_text", "ended_at", "exit_code"):
            snap[key] = row.get(key, snap.get(key))
        if row.get("lost") is not None:
            snap["lost"] = row["lost"]
        if snap.get("state") == SessionState.LOST and isinstance(snap.get("ended_at"), (int, float)):
            start = snap.get("started_at") or snap.get("created_at")  # its last snapshot's runtime is older
            if isinstance(start, (int, float)):
                snap["runtime"] = round(max(0.0, snap["ended_at"] - start), 3)
        return snap
    return dict(row)


class Sessions(dict[str, Supervised]):
    """The daemon's sessions by id; whoever watches them is told when one is added (the sampler, which
    sleeps while none is live)."""

    def __init__(self) -> None:
        super().__init__()
        self._added: Callable[[], None] = lambda: None

    def watch(self, added: Callable[[], None]) -> None:
        self._added = added

    def __setitem__(self, key: str, value: Supervised) -> None:
        super().__setitem__(key, value)
        self._added()


class SessionRegistry:
    """The sessions the daemon holds, found by id or name, in memory first and then the store."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.sessions = Sessions()  # live, and ended until stored
        self.recent = EndedSessions(RECENT_BYTES)  # the newest ended sessions' snapshots; the store has them all
        self.restartable = Restartables()  # the newest ended launched sessions' specs, for `restart`
        self.next_id = 1
        self._on_release: list[Callable[[str, Supervised | None], None]] = []

    @property
    def store(self) -> Store | None:
        return self.recorder.store

    async def resolve(self, ref: Any) -> str:
        """A session id from an id or a name: memory first, then the store. A name names the live session
        that has it (live names are unique unless an agent's hooks chose them), else the one ended
        session that had it; a name several sessions had is an error listing them."""
        if not isinstance(ref, str) or not ref:
            raise RequestError("a session id or name is required")
        if ref in self.sessions or ref in self.recent:
            return ref
        named = [sid for sid, s in self.sessions.items() if s.spec.name == ref and not s.final]
        if not named:
            named = [sid for sid, s in self.sessions.items() if s.spec.name == ref] + self.recent.named(ref)
            store = self.store
            if store is not None:
                rows = await anyio.to_thread.run_sync(store.find_sessions, ref, NAMES_SHOWN + 1)
                for row in rows:
                    if row["id"] not in named and row["id"] not in self.sessions:
                        self.recent.add(row["id"], row_snapshot(row))
                        named.append(row["id"])
        named = list(dict.fromkeys(named))
        if not named:
            raise UnknownSession(f"no session {ref[:80]!r} (see 'loopwarden ls')")
        if len(named) > 1:
            ids = sorted(named, key=_id_number)
            shown = ", ".join(ids[:NAMES_SHOWN]) + (", ..." if len(ids) > NAMES_SHOWN else "")
            raise RequestError(f"name {ref[:80]!r} matches {shown}; use an id")
        return named[0]

    def unique_name(self, name: str) -> tuple[str, bool]:
        """`name`, or `name-2`, `name-3`... when a live session has it; and whether it was changed."""
        taken = {s.spec.name for s in self.sessions.values() if not s.final}
        if name not in taken:
            return name, False
        n = 2
        while (unique := f"{name[:NAME_CHARS - len(str(n)) - 1]}-{n}") in taken:
            n += 1
        return unique, True

    async def live(self, ref: Any) -> Supervised:
        sid = await self.resolve(ref)
        session = self.sessions.get(sid)
        if session is None or session.final:
            raise RequestError(f"session {sid} has ended; only its history remains")
        return session

    def live_snapshot(self, session: Supervised) -> dict[str, Any]:
        snap = session.snapshot()
        snap["tags"] = list(session.spec.tags)
        snap["dropped_events"] = self.recorder.dropped.get(session.spec.id, 0)
        return snap

    def snapshot(self, sid: str) -> dict[str, Any]:
        session = self.sessions.get(sid)
        if session is not None:
            return self.live_snapshot(session)
        return self.recent.get(sid) or {"id": sid}

    def all_sessions(self, wanted: set[str] | None = None) -> list[str]:
        """The newest ended sessions and every live one, oldest first, from memory."""
        ids = [sid for sid in self.recent if sid not in self.sessions] + list(self.sessions)
        return [sid for sid in ids if wanted is None or sid in wanted]

    def new_id(self) -> str:
        sid = f"s{self.next_id}"
        self.next_id += 1
        return sid

    def ids_after(self, highest: int) -> None:
        """Ids go on after `highest` (a number an earlier daemon gave)."""
        self.next_id = max(self.next_id, 1 + highest)

    def add(self, session: Supervised) -> None:
        """A session starts: held, and found by its id, until it is released."""
        self.sessions[session.spec.id] = session

    def took_history(self, rows: list[dict[str, Any]], highest: int) -> None:
        """The newest ended sessions the store holds, and the highest id it has given, taken in."""
        for row in rows:
            if row["id"] not in self.sessions:
                self.recent.add(row["id"], row_snapshot(row))
        self.ids_after(highest)

    def on_release(self, forget: Callable[[str, Supervised | None], None]) -> None:
        """Have `forget` called with each session that leaves memory (what another part keeps of it)."""
        self._on_release.append(forget)

    def release(self, sid: str) -> None:
        """An ended session leaves memory, its final snapshot stored: its history stays in the store, its
        snapshot in `recent` and what a restart needs in `restartable`, so memory does not grow with the
        sessions run."""
        session = self.sessions.pop(sid, None)
        for forget in self._on_release:
            forget(sid, session)
        if session is not None:
            self.recent.add(sid, self.live_snapshot(session))
            if session.restartable:
                self.restartable.add(sid, Restartable(session.spec, session.config, *session.failed()))
