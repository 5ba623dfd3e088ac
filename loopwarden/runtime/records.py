"""The record path to the store: lanes, bounded transactions, awaitable durability, counted failures.

Every record a session produces (event, verdict, gate, spill, session snapshot) joins
that session's lane; audit rows have a lane of their own. A flusher writes the lanes
in transactions of at most TXN_ROWS rows or TXN_BYTES bytes, round-robin, every
FLUSH_SECONDS, on a worker thread (a small one someone waits on, on the event loop). Someone who
needs a record stored before going on (a handshake verdict must not reach its agent
before its event is durable; an operator action is answered only once its audit row
is) waits on its lane's mark: the lanes waited on in one pass of the event loop are
written next, in one small transaction (at once on the loop when nothing else is
writing), so a flood in other sessions never delays them by more than one bounded
transaction (group commit: what else queued meanwhile rides along, up to that size).

Memory is bounded by bytes: past BACKLOG_HIGH bytes waiting for the store, session
pumps wait (their agents' pipes fill and the agents block); past PENDING_CAP, events
are dropped and counted. A failed write (a full disk, an I/O error) never raises:
its rows are counted by table, session snapshots and gates are queued again (they are
state, written whole next time), and waiters learn that it failed. Without a store
(it could not be opened) the daemon runs on, and the flusher tries to open it again.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain, groupby
from operator import itemgetter
from pathlib import Path
from typing import Any, Final, Literal

import anyio

from .store import Batch, EventRow, Store, StoreError

FLUSH_SECONDS: Final = 0.25  # rows scattered over many sessions' index pages cost less in fewer, larger commits
CHECKPOINT_SECONDS: Final = 1.0  # after a write, the write-ahead log is copied into the database this much later
TXN_ROWS: Final = 1000  # rows in one transaction, so a waiter never waits long behind a backlog
TXN_BYTES: Final = 1 << 20  # ... and bytes
REOPEN_SECONDS: Final = 5.0  # how often a daemon without a store tries to open it again
ROW_OVERHEAD: Final = 1024  # bytes a record costs in memory beyond its text: its dicts, measured (bench/live_scale.py)
BACKLOG_HIGH: Final = 16 << 20  # bytes waiting for the store before session pumps wait
BACKLOG_LOW: Final = 4 << 20  # ... and resume once the backlog is back under this
PENDING_CAP: Final = 256 << 20  # past this, events are dropped (and counted) instead of queued
INLINE_ROWS: Final = 64  # a transaction this small, for a waiter, is written on the event loop when the store is free
# (a thread hop costs more than such a write)
INLINE_BYTES: Final = 64 << 10  # ... and no larger than this
FAILED_KEPT: Final = 256  # failed ranges remembered for durability waiters
LOG_EVERY: Final = 10.0  # seconds between two log lines about failing writes
AUDIT: Final = ""  # the lane of audit rows

_TABLES: Final = {"events": "events", "verdicts": "verdicts", "gates": "gates_upsert", "spills": "spills",
           "actions": "actions", "sessions": "sessions_upsert", "positions": "positions"}
ROWS: Final = "rows"  # the kind of an entry holding a list of event rows (add_rows): one entry per chunk a session read

# (add number, kind, row, bytes): a row is a dict, an EventRow for "events", a list of EventRows for ROWS
Entry = tuple[int, str, dict[str, Any] | EventRow | list[EventRow], int]
_COST: Final = itemgetter(3)
_KIND: Final = itemgetter(1)
_ROW: Final = itemgetter(2)


@dataclass
class StoreHealth:
    """What could not be written since the daemon started, for `status` and the console."""

    open: bool = False
    write_errors: int = 0
    unwritten: dict[str, int] = field(default_factory=dict)  # table -> rows lost
    last_error: str | None = None
    last_error_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"open": self.open, "write_errors": self.write_errors, "unwritten": dict(self.unwritten),
                "last_error": self.last_error, "last_error_at": self.last_error_at}


class WriteFailures:
    """What could not be written: rows counted by table and events by session, the last error kept, and a log
    line at most every LOG_EVERY seconds (the log may be on the full disk too)."""

    def __init__(self, log: Callable[[str], None], clock: Callable[[], float]) -> None:
        self.log = log
        self.clock = clock
        self.health = StoreHealth()
        self.dropped: dict[str, int] = {}  # session -> events not stored (dropped or failed)
        self._last_log = 0.0
        self._errors_since_log = 0

    def note(self, error: str) -> None:
        """Count a failed write or open; log it at most every LOG_EVERY seconds."""
        health = self.health
        health.write_errors += 1
        health.last_error, health.last_error_at = error[:500], self.clock()
        self._errors_since_log += 1
        now = time.monotonic()
        if now - self._last_log >= LOG_EVERY:
            self._last_log = now
            count, self._errors_since_log = self._errors_since_log, 0
            self.log(f"store write failed ({count} time{'s' if count != 1 else ''} since the last report); "
                     f"the daemon and its sessions go on, unwritten rows are counted: {error[:300]}")

    def lost(self, entries: list[Entry]) -> None:
        """Entries that will never be written: their rows counted by table, their events by session."""
        lost = self.health.unwritten
        for _, kind, row, _ in entries:
            if kind == ROWS:
                assert isinstance(row, list)
                lost["events"] = lost.get("events", 0) + len(row)
                if row:
                    self.dropped[row[0][0]] = self.dropped.get(row[0][0], 0) + len(row)
                continue
            if kind in ("events", "verdicts", "actions", "spills"):
                lost[kind] = lost.get(kind, 0) + 1
            if kind == "events":
                sid = row[0] if isinstance(row, tuple) else str(row.get("session_id") or "")  # type: ignore[union-attr]
                self.dropped[sid] = self.dropped.get(sid, 0) + 1


class Recorder:
    """Queues records in lanes and writes them to the store; see the module docstring."""

    def __init__(self, path: Path, *, log: Callable[[str], None], clock: Callable[[], float] = time.time,
                 on_requeue_sessions: Callable[[list[str]], None] = lambda ids: None,
                 flush_seconds: float = FLUSH_SECONDS, pending_cap: int = PENDING_CAP) -> None:
        self.path = path
        self.flush_seconds = flush_seconds
        self.pending_cap = pending_cap
        self.log = log
        self.clock = clock
        self.on_requeue_sessions = on_requeue_sessions
        self.on_positions: Callable[[list[dict[str, Any]]], None] | None = None  # kept agents' positions, stored
        self._positions = 0  # position rows queued, not yet settled (the settle looks for them only then)
        self.store: Store | None = None
        # when the store opens: on_open reads what the daemon needs (in the opening thread, may raise
        # StoreError: the store is not used), after_open hands it over (on the event loop)
        self.on_open: Callable[[Store], Any] | None = None
        self.after_open: Callable[[Any], None] = lambda found: None
        self.found: Any = None
        self.failures = WriteFailures(log, clock)
        self.health = self.failures.health
        self.dropped = self.failures.dropped  # session -> events not stored (dropped or failed)
        self.lanes: dict[str, deque[Entry]] = {}  # lane -> entries, oldest first; lanes rotate
        self.added = 0  # add number of the newest entry
        self.latest: dict[str, int] = {}  # lane -> add number of its newest entry
        self.done: dict[str, int] = {}  # lane -> every entry up to this add number is written (or failed)
        self.pending_bytes = 0  # queued, not yet being written
        self.writing_bytes = 0
        self._failed: deque[tuple[str, int, int]] = deque(maxlen=FAILED_KEPT)  # (lane, first, last) add numbers
        self._wanted: dict[str, int] = {}  # lane -> waiters
        self._soon = False  # _write_waited is scheduled
        self._write_lock = anyio.Lock()
        self._has_work = anyio.Event()
        self._signalled = False  # _has_work is set (the flusher resets both when it starts a round)
        self._urgent = anyio.Event()
        self._written = anyio.Event()
        self._wrote = anyio.Event()  # written since the last checkpoint
        self._drained = anyio.Event()  # set while not over_backlog (what backpressure waits for)
        self._drained.set()
        self.over_backlog = False  # the queue passed BACKLOG_HIGH and has not yet fallen under BACKLOG_LOW
        self._last_open_attempt = 0.0

    # ---- opening --------------------------------------------------------------
    def open(self) -> bool:
        """Open the store (any thread); on failure the daemon runs without it and retries."""
        self._last_open_attempt = time.monotonic()
        try:
            store = Store.open(self.path)
        except (StoreError, OSError) as exc:
            self.failures.note(f"cannot open the store: {exc}")
            return False
        try:
            self.found = self.on_open(store) if self.on_open is not None else None
            store.defer_checkpoints()
        except (StoreError, OSError, sqlite3.Error) as exc:
            store.close()
            self.failures.note(f"cannot use the store: {exc}")
            return False
        self.store = store
        self.health.open = True
        return True

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
            self.health.open = False

    # ---- adding -----------------------------------------------------------------
    def add(self, kind: str, lane: str, row: dict[str, Any] | EventRow, size: int = 0) -> bool:
        """Queue one row for table `kind` in `lane`; False when an event was dropped (over PENDING_CAP)."""
        cost = size + ROW_OVERHEAD
        if kind == "events" and self.pending_bytes + self.writing_bytes + cost > self.pending_cap:
            self.dropped[lane] = self.dropped.get(lane, 0) + 1
            return False
        self._queue(lane, kind, row, cost)
        return True

    def add_rows(self, lane: str, rows: list[EventRow], size: int) -> bool:
        """Queue event rows for `lane` as one entry (a session's rows of one chunk, read from `size` bytes): one
        add number, and one entry to take and keep alive, where `add` made one of each per event. All or none:
        False when they were dropped (over PENDING_CAP), and counted. An entry counts once against TXN_ROWS;
        TXN_BYTES bounds its rows, each costing ROW_OVERHEAD at least."""
        cost = size + ROW_OVERHEAD * len(rows)
        if self.pending_bytes + self.writing_bytes + cost > self.pending_cap:
            self.dropped[lane] = self.dropped.get(lane, 0) + len(rows)
            return False
        self._queue(lane, ROWS, rows, cost)
        return True

    def _queue(self, lane: str, kind: str, row: dict[str, Any] | EventRow | list[EventRow], cost: int) -> None:
        if kind == "positions":
            self._positions += 1
        added = self.added = self.added + 1
        entries = self.lanes.get(lane)
        if entries is None:
            entries = self.lanes[lane] = deque()
        entries.append((added, kind, row, cost))
        self.latest[lane] = added
        queued = self.pending_bytes = self.pending_bytes + cost
        if queued + self.writing_bytes >= BACKLOG_HIGH and not self.over_backlog:
            self.over_backlog = True
            self._drained = anyio.Event()
            self._urgent.set()  # write now: waiting out the batching window would hold every pump that long
            self._has_work.set()
        if not self._signalled:
            self._signal()

    def poke(self) -> None:
        """Something changed (a snapshot to publish): run a flusher round."""
        if not self._signalled:
            self._signal()

    def _signal(self) -> None:
        """Wake the flusher; once per round (add() runs per event: setting a set Event costs two calls)."""
        self._signalled = True
        self._has_work.set()

    def mark(self, lane: str) -> int:
        """What `durable(lane, mark)` waits for: everything added to `lane` so far."""
        return self.latest.get(lane, 0)

    def written(self, lane: str, mark: int) -> bool | None:
        """Whether `lane` is written up to `mark` (None: not yet attempted; False: it failed)."""
        if mark > self.done.get(lane, 0):
            return None
        return not any(failed == lane and first <= mark <= last for failed, first, last in self._failed)

    async def durable(self, lane: str, mark: int) -> bool:
        """Wait until `lane` is written up to `mark`; True when it was, False when the write failed."""
        while (result := self.written(lane, mark)) is None:
            self._wanted[lane] = self._wanted.get(lane, 0) + 1
            try:
                if not self._soon:
                    self._soon = True
                    asyncio.get_running_loop().call_soon(self._write_waited)
                await self._written.wait()
            finally:
                self._wanted[lane] -= 1
                if not self._wanted[lane]:
                    del self._wanted[lane]
        return result

    def _write_waited(self) -> None:
        """What waiters asked for in this pass of the event loop, written at once on the loop in one small
        transaction when nothing else is writing (an operator's `kill` waits for its audit row): no flusher
        round, no task switch. Else, or when it is too large, the flusher writes it next, as before."""
        self._soon = False
        wanted = [lane for lane in self._wanted if self.lanes.get(lane)]
        if not wanted:
            return  # written meanwhile, or being written: the writer wakes the waiters
        if self.store is None or self._write_lock.locked() or not self._write_small(wanted):
            self._urgent.set()
            self._has_work.set()

    def _write_small(self, lanes: list[str]) -> bool:
        """`lanes` (and what rides along) in one transaction on the event loop; False when the store was
        busy or it came out too large, with everything put back as it was."""
        taken = self._take(lanes, self.added, INLINE_ROWS, INLINE_BYTES, within=True)
        if not taken:  # a row larger than a small transaction: the flusher's
            return False
        self._ride_along(taken, self.added)
        try:
            error = self._write_inline([e for got in taken.values() for e in got])
        finally:
            self.writing_bytes = 0
        if error is False:
            self._untake(taken)
            return False
        self._settle(taken, error)
        if self.pending_bytes < BACKLOG_LOW:
            self._drain_done()
        return True

    def _untake(self, taken: dict[str, list[Entry]]) -> None:
        """Entries taken but not written back at the front of their lanes, in their order."""
        for lane, got in taken.items():
            entries = self.lanes.get(lane)
            if entries is None:
                entries = self.lanes[lane] = deque()
            entries.extendleft(reversed(got))
            self.pending_bytes += sum(e[3] for e in got)

    def forget(self, lane: str) -> None:
        """A released session's lane, once all of it is written: nobody will wait on it again."""
        if self.latest.get(lane, 0) <= self.done.get(lane, 0) and not self.lanes.get(lane):
            self.lanes.pop(lane, None)
            self.latest.pop(lane, None)
            self.done.pop(lane, None)

    def _drain_done(self) -> None:
        """The queue fell under BACKLOG_LOW: reading goes on (`over_backlog` is a plain attribute, read once
        per chunk read, where a property over the event cost three calls)."""
        self.over_backlog = False
        self._drained.set()

    async def backpressure(self) -> None:
        """Held by a session's pump while the store is behind: its agent's pipe fills and the agent
        waits, so memory stays flat under a flood and nothing is dropped."""
        if self.over_backlog:
            self._has_work.set()
            await self._drained.wait()

    # ---- writing ------------------------------------------------------------------
    async def run(self, before_flush: Callable[[], None]) -> None:
        """The flusher: sleeps while idle, batches for FLUSH_SECONDS, writes at once for a waiter."""
        last_round = 0.0
        while True:
            if self.store is None:  # no store: wake up to try opening it again, work or not
                with anyio.move_on_after(REOPEN_SECONDS):
                    await self._has_work.wait()
            else:
                await self._has_work.wait()
            urgent = self._urgent.is_set()
            if not urgent:
                with anyio.move_on_after(self.flush_seconds):
                    await self._urgent.wait()
            self._has_work = anyio.Event()
            self._signalled = False
            self._urgent = anyio.Event()
            try:
                if not urgent or time.monotonic() - last_round >= self.flush_seconds:  # a waiter's round only writes
                    last_round = time.monotonic()
                    before_flush()
                await self.flush()
            except Exception as exc:  # noqa: BLE001 - a bug here must not end the daemon and its agents
                self.log(f"flusher error (going on): {type(exc).__name__}: {exc}")
                await anyio.sleep(self.flush_seconds)

    async def checkpoints(self) -> None:
        """Checkpoint the store's write-ahead log CHECKPOINT_SECONDS after writes, off the writer's path."""
        while True:
            await self._wrote.wait()
            await anyio.sleep(CHECKPOINT_SECONDS)
            self._wrote = anyio.Event()
            store = self.store
            if store is not None:
                try:
                    await anyio.to_thread.run_sync(store.checkpoint)
                except StoreError as exc:
                    self.failures.note(str(exc))

    async def flush(self) -> None:
        """Write what was queued before the call, one bounded transaction at a time, lanes someone
        waits on first (readers call it too, so they see every record before them)."""
        upto = self.added  # what came later is the next round's: a flood never keeps one round going
        async with self._write_lock:
            if self.store is None and time.monotonic() - self._last_open_attempt >= REOPEN_SECONDS:
                if await anyio.to_thread.run_sync(self.open):
                    self.after_open(self.found)
                    self.log(f"store open again: {self.path}")
            while self.lanes:
                wanted = [lane for lane in self._wanted if self.lanes.get(lane)]
                taken = self._take(wanted, self.added)
                if taken:
                    self._ride_along(taken, upto)
                else:
                    taken = self._take(list(self.lanes), upto)
                if not taken:
                    break
                await self._write_taken(taken)
                if self.pending_bytes < BACKLOG_LOW:  # pumps go on while the rest is written
                    self._drain_done()
            if self.pending_bytes < BACKLOG_LOW:
                self._drain_done()

    def _take(self, lanes: list[str], upto: int, most_rows: int = TXN_ROWS, most_bytes: int = TXN_BYTES,
              *, within: bool = False) -> dict[str, list[Entry]]:
        """Entries added up to `upto` for one transaction, from the front of `lanes` (rotated, so
        every lane gets its turn). `within`: no entry that would take the bytes past `most_bytes`
        (else the last one may)."""
        taken: dict[str, list[Entry]] = {}
        rows = size = 0
        for lane in lanes:
            entries = self.lanes[lane]
            got: list[Entry] = []
            if not within and entries and entries[-1][0] <= upto and rows + len(entries) <= most_rows:
                whole = sum(map(_COST, entries))  # the whole lane fits: taken at once, as the loop below would
                if size + whole - entries[-1][3] < most_bytes:
                    got = list(entries)
                    entries.clear()
                    rows += len(got)
                    size += whole
            while (entries and entries[0][0] <= upto and rows < most_rows
                   and (size + entries[0][3] <= most_bytes if within else size < most_bytes)):
                entry = entries.popleft()
                got.append(entry)
                rows += 1
                size += entry[3]
            if got:
                taken[lane] = got
            if entries:
                self.lanes[lane] = self.lanes.pop(lane)
            else:
                del self.lanes[lane]
            if rows >= most_rows or size >= most_bytes:
                break
        self.pending_bytes -= size
        self.writing_bytes = size
        return taken

    def _ride_along(self, taken: dict[str, list[Entry]], upto: int) -> None:
        """A waiter's transaction small enough to be written on the event loop takes along, up to that
        size, what other lanes queued before the round: one commit instead of two (an operator's `kill`
        waits for its audit row while the session it ended queues its own rows)."""
        rows, size = sum(map(len, taken.values())), self.writing_bytes
        if rows >= INLINE_ROWS or size >= INLINE_BYTES:
            return
        taken.update(self._take([lane for lane in self.lanes if lane not in taken], upto,
                                INLINE_ROWS - rows, INLINE_BYTES - size, within=True))
        self.writing_bytes += size

    async def _write_taken(self, taken: dict[str, list[Entry]]) -> None:
        entries = [e for got in taken.values() for e in got]
        try:
            # only for a waiter: another program holding SQLite's write lock would stall the loop for the busy timeout
            inline = self._write_inline(entries) if len(entries) <= INLINE_ROWS and self._wanted else False
            if inline is False:
                with anyio.CancelScope(shield=True):  # taken from the lanes: written, or counted, never lost
                    error = await anyio.to_thread.run_sync(self._write, entries)
            else:
                error = inline
        finally:
            self.writing_bytes = 0
        self._settle(taken, error)

    def _settle(self, taken: dict[str, list[Entry]], error: str | None) -> None:
        """After a transaction: its lanes done up to it (or failed), state queued again on failure, waiters woken."""
        for lane, got in taken.items():
            self.done[lane] = max(self.done.get(lane, 0), got[-1][0])
            if error is not None:
                self._failed.append((lane, got[0][0], got[-1][0]))
        if error is not None:
            self._requeue([e for got in taken.values() for e in got])
        if self._positions:
            self._settle_positions(taken, error)
        if error is None:
            self._wrote.set()
        self._written.set()
        self._written = anyio.Event()

    def _settle_positions(self, taken: dict[str, list[Entry]], error: str | None) -> None:
        """Kept agents' positions in this transaction: when stored, their keeper may forget what they cover (a
        failed one is simply not told: the next one covers it)."""
        rows = [row for got in taken.values() for _, kind, row, _ in got if kind == "positions"]
        self._positions -= len(rows)
        if error is None and rows and self.on_positions is not None:
            self.on_positions(rows)  # type: ignore[arg-type]  # a position's row is a dict

    def flush_now(self, deadline: float | None = None) -> None:
        """The last write, at shutdown, outside the event loop; what is left at `deadline` (monotonic) is
        counted as unwritten (a store locked by another program must not hold the daemon up)."""
        while self.lanes:
            taken = self._take(list(self.lanes), self.added)
            entries = [e for got in taken.values() for e in got]
            if deadline is not None and time.monotonic() > deadline:
                self.failures.lost(entries)
                self.failures.note("the daemon stopped before everything was written")
            elif self._write(entries) is not None:
                self.failures.lost(entries)

    def _write_inline(self, entries: list[Entry]) -> str | Literal[False] | None:
        """A few rows, written on the event loop when the store is free (a thread hop costs more than the
        write): None when written, the error, or False when the store was busy."""
        store = self.store
        if store is None or self.writing_bytes > INLINE_BYTES:
            return False
        try:
            if not store.write_now(_batch(entries)):
                return False
        except StoreError as exc:
            self.failures.note(str(exc))
            return str(exc)
        return None

    def _write(self, entries: list[Entry]) -> str | None:
        """Entries in one transaction (any thread); the error text when they could not be written."""
        store = self.store
        if store is None:
            error = "the store is not open"
        else:
            try:
                store.write(_batch(entries))
                return None
            except StoreError as exc:
                error = str(exc)
        self.failures.note(error)
        return error

    def _requeue(self, entries: list[Entry]) -> None:
        """After a failed write: count what is lost; queue again what is state (gates; snapshots are
        published again by the daemon)."""
        self.failures.lost(entries)
        for _, kind, row, size in entries:
            if kind == "gates" and isinstance(row, dict):
                self.add(kind, str(row.get("session_id") or ""), row, size - ROW_OVERHEAD)
        self.on_requeue_sessions([str(row.get("id")) for _, kind, row, _ in entries
                                  if kind == "sessions" and isinstance(row, dict)])


def _batch(entries: list[Entry]) -> Batch:
    """The entries' rows by table, each table's in the entries' order (a tuple is an events row, a list of them
    a chunk's). A run of one kind (most of a lane is chunks of events) is moved in C."""
    batch = Batch()
    for kind, run in groupby(entries, _KIND):
        if kind == ROWS:
            batch.events.extend(chain.from_iterable(map(_ROW, run)))
        else:
            getattr(batch, _TABLES[kind]).extend(map(_ROW, run))
    if len(batch.positions) > 1:  # a session's last position in the transaction covers its earlier ones
        batch.positions = list({row["session_id"]: row for row in batch.positions}.values())
    return batch
