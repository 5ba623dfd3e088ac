"""The daemon's session registry: ids, names, live and recently ended sessions, their snapshots."""

from __future__ import annotations

from typing import Any

import anyio

from ..supervisor.verdicts import SessionState
from . import lost as lost_sessions
from .contract import Supervised
from .parts import DaemonParts, RequestError
from .requests import NAME_CHARS
from .restarts import Restartable
from .session import LiveSession
from .store import Store, StoreError

RECENT_BYTES = 4 << 20  # snapshots of ended sessions kept in memory (the store has every one)
HOOKED_ENDED_KEPT = 200  # terminated hook sessions remembered, so later hook calls still stop Claude
NAMES_SHOWN = 8  # sessions an ambiguous name's error lists


class UnknownSession(RequestError):
    """No session has this id or name."""


def _id_number(sid: str) -> int:
    return int(sid[1:]) if sid[:1] == "s" and sid[1:].isdigit() else 0


_SESSION_COLUMNS = ("id", "name", "adapter", "command", "cwd", "env_keys", "preset", "state", "created_at",
                    "started_at", "ended_at", "pid", "exit_code", "termination", "termination_text",
                    "dropped_events", "handshake")


def _session_row(snap: dict[str, Any]) -> dict[str, Any]:
    row = {k: snap.get(k) for k in _SESSION_COLUMNS}
    row["snapshot"] = snap
    return row


def _row_snapshot(row: dict[str, Any]) -> dict[str, Any]:
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


class SessionRegistry(DaemonParts):
    """The sessions the daemon holds, found by id or name, in memory first and then the store."""

    def _read_history(self, store: Store) -> tuple[list[str], list[dict[str, Any]], int]:
        """When the store has just been opened (in the opening thread): mark the sessions earlier daemons
        left running as lost, and read the newest ended ones and the highest id. Raises StoreError."""
        live = set(self.sessions)  # a copy taken at once: the event loop may add to it meanwhile
        lost = store.mark_lost(self.clock(), keep=live)
        try:
            self._lost_pending = lost_sessions.settle(store, lost, str(self.paths.data), self.instance)
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - a report that cannot be read never keeps the store closed
            self._log(f"cannot say how the lost sessions ended ({type(exc).__name__}: {exc}); they read as lost")
        return lost, store.recent_sessions(RECENT_BYTES), store.max_session_number()

    def _took_history(self, found: tuple[list[str], list[dict[str, Any]], int]) -> None:
        """What `_read_history` found, taken in on the event loop."""
        _lost, rows, highest = found
        for row in rows:
            if row["id"] not in self.sessions:
                self.recent.add(row["id"], _row_snapshot(row))
        self.next_id = max(self.next_id, 1 + highest)
        if self._lost_pending is not None and self._lost_pending.sessions and self._tg is not None:
            self._tg.start_soon(self._settle_lost)  # (at the daemon's start, serve starts it)

    _lost_pending: lost_sessions.Settled | None = None

    async def _settle_lost(self) -> None:
        """Sessions an earlier daemon lost while its guardian was still stopping them: once that guardian is
        done (at most lost.PENDING_WAIT), say again how they ended, in the store and to every console."""
        pending, self._lost_pending = self._lost_pending, None
        if pending is None or not pending.sessions:
            return
        with anyio.move_on_after(lost_sessions.PENDING_WAIT):
            for guardian in pending.guardians:
                await lost_sessions.gone(guardian)
        store = self.store
        if store is None:
            return

        def again() -> list[dict[str, Any]]:
            lost_sessions.settle(store, pending.sessions, str(self.paths.data), self.instance)
            return [row for sid in pending.sessions if (row := store.session(sid)) is not None]

        try:
            rows = await anyio.to_thread.run_sync(again)
        except StoreError as exc:
            self._log(f"cannot say how the lost sessions {', '.join(pending.sessions)} ended: {exc}")
            return
        for row in rows:
            snap = _row_snapshot(row)
            if row["id"] in self.recent:
                self.recent.replace(row["id"], snap)
            self._broadcast("session", row["id"], snap, is_event=False)

    async def _resolve(self, ref: Any) -> str:
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
                        self.recent.add(row["id"], _row_snapshot(row))
                        named.append(row["id"])
        named = list(dict.fromkeys(named))
        if not named:
            raise UnknownSession(f"no session {ref[:80]!r} (see 'loopwarden ls')")
        if len(named) > 1:
            ids = sorted(named, key=_id_number)
            shown = ", ".join(ids[:NAMES_SHOWN]) + (", ..." if len(ids) > NAMES_SHOWN else "")
            raise RequestError(f"name {ref[:80]!r} matches {shown}; use an id")
        return named[0]

    def _unique_name(self, name: str) -> tuple[str, bool]:
        """`name`, or `name-2`, `name-3`... when a live session has it; and whether it was changed."""
        taken = {s.spec.name for s in self.sessions.values() if not s.final}
        if name not in taken:
            return name, False
        n = 2
        while (unique := f"{name[:NAME_CHARS - len(str(n)) - 1]}-{n}") in taken:
            n += 1
        return unique, True

    async def _live(self, ref: Any) -> Supervised:
        sid = await self._resolve(ref)
        session = self.sessions.get(sid)
        if session is None or session.final:
            raise RequestError(f"session {sid} has ended; only its history remains")
        return session

    def _live_snapshot(self, session: Supervised) -> dict[str, Any]:
        snap = session.snapshot()
        snap["dropped_events"] = self.recorder.dropped.get(session.spec.id, 0)
        return snap

    def _snapshot(self, sid: str) -> dict[str, Any]:
        session = self.sessions.get(sid)
        if session is not None:
            return self._live_snapshot(session)
        return self.recent.get(sid) or {"id": sid}

    def _all_sessions(self, wanted: set[str] | None = None) -> list[str]:
        """The newest ended sessions and every live one, oldest first, from memory."""
        ids = [sid for sid in self.recent if sid not in self.sessions] + list(self.sessions)
        return [sid for sid in ids if wanted is None or sid in wanted]

    def _new_id(self) -> str:
        sid = f"s{self.next_id}"
        self.next_id += 1
        return sid

    async def _run_session(self, session: Supervised) -> None:
        try:
            await session.run()
        except Exception as exc:  # noqa: BLE001 - a session's failure is recorded, never the daemon's end
            self._log(f"session {session.spec.id} crashed the supervisor loop: {type(exc).__name__}: {exc}")
            session.state = SessionState.EXITED
            session.ended_at = session.ended_at or self.clock()  # else its runtime would grow forever
        self._mark(session.spec.id)

    def _release_ended(self) -> None:
        """Ended sessions leave memory once their final snapshot is stored; their history stays in the
        store and their snapshot in `recent`, so memory does not grow with the sessions run."""
        for sid, mark in list(self.releasing.items()):
            written = self.recorder.written(sid, mark)
            if written is None or sid in self.dirty:
                continue
            del self.releasing[sid]
            if not written:
                self._mark(sid)  # the write failed: try again with the next round
                continue
            session = self.sessions.pop(sid, None)
            self.attached.pop(sid, None)
            self._proc_cache.pop(sid, None)
            self.recorder.forget(sid)
            if session is not None:
                self.recent.add(sid, self._live_snapshot(session))
                if isinstance(session, LiveSession):
                    self.restartable.add(sid, Restartable(session.spec, session.config, *session.failed()))
                key = session.hook_key
                if key is not None and session.state != SessionState.TERMINATED and self.hooked.get(key) is session:
                    del self.hooked[key]
