"""The operations that read: sessions, their history, their processes, pending gates and the audit log."""

from __future__ import annotations

from typing import Any

import anyio

from ..supervisor.verdicts import FINAL_STATES, final_exit_code
from .call_changes import CallChanges
from .processes import ProcessListing
from .records import Recorder
from .registry import SessionRegistry, row_snapshot
from .requests import RequestError
from .store import HISTORY_TABLES
from .store_filter import RecordFilter, text_field, time_field

LIST_PAGE = 1000  # sessions in one page of older history (`list` with `before`)
LIST_BYTES = 8 << 20  # ... and at most this many bytes of their snapshots
LOGS_LIMIT = 10_000  # rows of each table in one `logs` page
LOGS_BYTES = 4 << 20  # text in one `logs` page: a reply (and the daemon) never holds more per request
SPILLS_SHOWN = 200  # the newest spill files listed with a `logs` page
CURSOR = {"events": "after", "verdicts": "verdicts_after", "actions": "actions_after"}


def _count(value: Any, default: int, most: int) -> int:
    """A whole number from a request, between 1 and `most` (`default` when absent or not a number)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return default
    return max(1, min(value, most))


def _cursor(value: Any) -> int:
    """A row id to read after (0: from the start)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def no_store(what: str) -> RequestError:
    return RequestError(f"the store is not open (see 'loopwarden status'); {what}", kind="daemon")


class ReadOperations:
    """`op_list`, `op_status`, `op_logs`, `op_processes`, `op_gates`, `op_actions`, `op_exit_code`; and
    `calls_diff`, which the `diff` op answers with for a session without a worktree."""

    def __init__(self, registry: SessionRegistry, recorder: Recorder, listing: ProcessListing) -> None:
        self.registry = registry
        self.recorder = recorder
        self.listing = listing
        self.changes = CallChanges()

    async def op_list(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        """Every live session and the newest ended ones, oldest first. With `stored: true`, a page of the
        store instead, newest first: `limit` sessions created before session `before` (or the newest)."""
        if not req.get("stored"):
            return [self.registry.snapshot(sid) for sid in self.registry.all_sessions()]
        before, limit = req.get("before"), _count(req.get("limit"), LIST_PAGE, LIST_PAGE)
        if before is not None and not isinstance(before, str):
            raise RequestError("'before' must be a session id")
        store = self.recorder.store
        if store is None:
            raise no_store("only recent sessions are shown")
        rows = await anyio.to_thread.run_sync(lambda: store.recent_sessions(LIST_BYTES, before=before, limit=limit))
        return [row_snapshot(row) for row in reversed(rows)]

    async def op_status(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        return self.registry.snapshot(await self.registry.resolve(req.get("session")))

    async def op_logs(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        """A page of a session's stored history, bounded by `limit` rows a table and by bytes.

        tail: the newest records. Otherwise the records after the cursors (`after`, `verdicts_after`,
        `actions_after`), merged by time. `newest: N` returns only the cursors from which the newest N
        of each table follow (`start`) and the newest ids now (`end`). Replies carry `next` (the cursors to
        continue from) and `more`. `since`, `until`, `grep` and `rule` keep only the records that match
        (runtime/store_filter.py), in the store's query."""
        sid = await self.registry.resolve(req.get("session"))
        await self.recorder.flush()
        store = self.recorder.store
        if store is None:
            raise no_store("history cannot be read now")
        limit = _count(req.get("limit"), 1000, LOGS_LIMIT)
        max_bytes = _count(req.get("max_bytes"), LOGS_BYTES, LOGS_BYTES)
        only = RecordFilter.of_request(req)
        tables = req.get("tables")
        tables = only.tables([t for t in HISTORY_TABLES if t in tables] if isinstance(tables, list)
                             else HISTORY_TABLES)
        cursors = {t: _cursor(req.get(CURSOR[t])) for t in HISTORY_TABLES}
        newest = req.get("newest")

        def read() -> dict[str, Any]:  # in a worker thread, so a long read never stalls the sessions
            if newest is not None:
                n = _count(newest, 1000, 1 << 31)
                return {"session": sid, "start": {CURSOR[t]: store.newest_start(sid, t, n, only) for t in tables},
                        "end": {CURSOR[t]: store.newest_start(sid, t, 0) for t in tables}}
            if req.get("tail"):
                rows, more = store.newest(sid, limit=limit, max_bytes=max_bytes, tables=tables, only=only)
                after = {t: (rows[t][-1]["id"] if rows[t] else cursors[t]) for t in HISTORY_TABLES}
            else:
                rows, after, more = store.history(sid, cursors, limit=limit, max_bytes=max_bytes, tables=tables,
                                                  only=only)
            return {"session": sid, **rows, "spills": store.spills(sid, limit=SPILLS_SHOWN), "more": more,
                    "next": {CURSOR[t]: after[t] for t in HISTORY_TABLES}}

        return await anyio.to_thread.run_sync(read)

    async def op_processes(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        """The agent's process tree (and, for a session we started, its whole process group)."""
        return await self.listing.rows(await self.registry.resolve(req.get("session")))

    async def op_gates(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        out = []
        for sid, session in self.registry.sessions.items():
            if session.final:
                continue
            for gate in session.health.pending_gates():
                out.append({"session": sid, "name": session.spec.name, **gate.to_dict(), "ref": f"{sid}:{gate.id}"})
        if self.changes.unread(out):  # a new gate: its call is read from the store, once written there
            await self.recorder.flush()
        if self.recorder.store is not None:
            await self.changes.attach(self.recorder.store, out)
        return sorted(out, key=lambda g: g["opened_at"])

    async def op_actions(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        await self.recorder.flush()
        store = self.recorder.store
        if store is None:
            raise no_store("the audit log cannot be read now")
        sid = await self.registry.resolve(req["session"]) if req.get("session") else None
        limit = _count(req.get("limit"), 1000, LOGS_LIMIT)
        action, actor, since = text_field(req, "action"), text_field(req, "actor"), time_field(req, "since")
        return await anyio.to_thread.run_sync(lambda: store.actions(session_id=sid, limit=limit, action=action,
                                                                     actor=actor, since=since))

    async def calls_diff(self, sid: str) -> dict[str, Any]:
        """What a session without a worktree changed, from its calls (runtime/call_changes.py); the `diff` op
        (runtime/ops_worktree.py) answers with it."""
        await self.recorder.flush()
        store = self.recorder.store
        if store is None:
            raise no_store("its changes cannot be read now")
        return await self.changes.diff(store, sid, self.registry.snapshot(sid).get("cwd"))

    async def op_exit_code(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        snap = self.registry.snapshot(await self.registry.resolve(req.get("session")))
        return {"final": snap.get("state") in FINAL_STATES, "exit_code": final_exit_code(snap)}
