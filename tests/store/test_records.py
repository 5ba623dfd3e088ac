"""The record path (runtime/records.py) on a real SQLite file: lanes, durability, bounded
transactions, failures counted, state queued again, no store at all."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from loopwarden.runtime import records
from loopwarden.runtime.records import AUDIT, Recorder
from loopwarden.runtime.store import Store

pytestmark = pytest.mark.anyio


def event(sid: str, seq: int, text: str = "x") -> dict:
    return {"session_id": sid, "seq": seq, "ts": float(seq), "kind": "output", "data": {"type": "output", "text": text}}


def make(tmp_path: Path, logs: list[str] | None = None, **settings: Any) -> Recorder:
    recorder = Recorder(tmp_path / "lw.db", log=(logs if logs is not None else []).append, **settings)
    assert recorder.open()
    return recorder


def stored(path: Path, sid: str) -> list[int]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT seq FROM events WHERE session_id = ? ORDER BY id", [sid])]


async def test_a_waiter_is_answered_once_its_lane_is_written_and_not_before(tmp_path: Path) -> None:
    recorder = make(tmp_path)
    recorder.add("events", "s1", event("s1", 1))
    mark = recorder.mark("s1")
    assert recorder.written("s1", mark) is None
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run, lambda: None)
        with anyio.fail_after(5):
            assert await recorder.durable("s1", mark) is True
        tg.cancel_scope.cancel()
    assert stored(tmp_path / "lw.db", "s1") == [1]


async def test_a_waiter_does_not_wait_behind_another_lanes_backlog(tmp_path: Path) -> None:
    recorder = make(tmp_path)
    for seq in range(1, 20_001):  # ten transactions' worth in a flooding session
        recorder.add("events", "flood", event("flood", seq))
    recorder.add("events", "s1", event("s1", 1))
    mark = recorder.mark("s1")
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run, lambda: None)
        with anyio.fail_after(10):
            assert await recorder.durable("s1", mark)
        flood_done = recorder.done.get("flood", 0)
        tg.cancel_scope.cancel()
    assert stored(tmp_path / "lw.db", "s1") == [1]
    assert flood_done < 20_000  # s1 went first: at most one bounded transaction of the flood before it


async def test_a_waiters_small_transaction_takes_along_what_other_lanes_queued(tmp_path: Path) -> None:
    recorder = make(tmp_path)
    assert recorder.store is not None
    writes: list[int] = []  # rows per transaction
    write = recorder.store.write
    recorder.store.write = lambda batch: (writes.append(len(batch)), write(batch))[1]  # type: ignore[method-assign]

    async def audited(seqs: range) -> None:
        for seq in seqs:
            recorder.add("events", "s1", event("s1", seq))
        recorder.add("actions", AUDIT, {"ts": 1.0, "actor": "op", "action": "kill", "session_id": "s1"})
        async with anyio.create_task_group() as tg:
            tg.start_soon(recorder.run, lambda: None)
            with anyio.fail_after(5):
                assert await recorder.durable(AUDIT, recorder.mark(AUDIT))
            await recorder.flush()
            tg.cancel_scope.cancel()

    await audited(range(1, 4))
    assert writes == [4]  # one commit: the audit row and the session's three rows
    # near miss: more queued elsewhere than a waiter's small transaction holds: it stays that small
    writes.clear()
    await audited(range(4, 4 + 2 * records.INLINE_ROWS))
    assert writes[0] == records.INLINE_ROWS and sum(writes) == 2 * records.INLINE_ROWS + 1
    assert stored(tmp_path / "lw.db", "s1") == list(range(1, 4 + 2 * records.INLINE_ROWS))


async def test_a_waiters_rows_are_written_on_the_loop_at_once_unless_a_flush_is_writing(tmp_path: Path) -> None:
    recorder = make(tmp_path)
    audit = {"ts": 1.0, "actor": "op", "action": "kill", "session_id": "s1"}
    recorder.add("actions", AUDIT, audit)
    with anyio.fail_after(5):  # no flusher runs: the waiter's pass of the loop writes it
        assert await recorder.durable(AUDIT, recorder.mark(AUDIT)) is True
    # near miss: while a flush holds the writer, the waiter's row is left to the flusher
    recorder.add("actions", AUDIT, audit)
    mark = recorder.mark(AUDIT)
    async with anyio.create_task_group() as tg:
        await recorder._write_lock.acquire()
        tg.start_soon(recorder.durable, AUDIT, mark)
        await anyio.wait_all_tasks_blocked()
        await anyio.lowlevel.checkpoint()  # after the waiter's callback, queued before this step's resumption
        assert recorder.written(AUDIT, mark) is None and recorder._urgent.is_set()
        recorder._write_lock.release()
        tg.start_soon(recorder.run, lambda: None)
        with anyio.fail_after(5):
            assert await recorder.durable(AUDIT, mark) is True
        tg.cancel_scope.cancel()
    with sqlite3.connect(tmp_path / "lw.db") as db:
        assert db.execute("SELECT count(*) FROM actions").fetchone()[0] == 2


async def test_every_transaction_is_bounded(tmp_path: Path) -> None:
    recorder = make(tmp_path)
    for seq in range(1, records.TXN_ROWS * 3 + 1):
        recorder.add("events", "s1", event("s1", seq))
    taken = recorder._take(list(recorder.lanes), recorder.added)
    assert sum(len(got) for got in taken.values()) == records.TXN_ROWS


async def test_a_failed_write_is_counted_its_waiters_told_and_state_queued_again(tmp_path: Path) -> None:
    logs: list[str] = []
    requeued: list[list[str]] = []
    recorder = make(tmp_path, logs)
    recorder.on_requeue_sessions = requeued.append
    assert recorder.store is not None
    recorder.store.db.execute("PRAGMA query_only = 1")  # SQLite refuses every write, as a full disk would
    recorder.add("events", "s1", event("s1", 1))
    recorder.add("gates", "s1", {"session_id": "s1", "gate_id": "g1", "status": "pending"})
    recorder.add("sessions", "s1", {"id": "s1", "state": "running"})
    recorder.add("actions", AUDIT, {"ts": 1.0, "actor": "op", "action": "kill", "session_id": "s1"})
    event_mark, audit_mark = recorder.mark("s1"), recorder.mark(AUDIT)
    await recorder.flush()
    assert recorder.written("s1", event_mark) is False and recorder.written(AUDIT, audit_mark) is False
    assert await recorder.durable(AUDIT, audit_mark) is False
    assert recorder.health.unwritten == {"events": 1, "actions": 1}
    assert recorder.dropped == {"s1": 1}
    assert requeued == [["s1"]]
    assert [entry[1] for entry in recorder.lanes["s1"]] == ["gates"]  # the gate waits for the next write
    assert recorder.health.write_errors >= 1 and "readonly" in str(recorder.health.last_error)
    assert len(logs) == 1  # logged once, however often it fails
    recorder.store.db.execute("PRAGMA query_only = 0")
    await recorder.flush()
    with sqlite3.connect(tmp_path / "lw.db") as db:
        assert db.execute("SELECT gate_id FROM gates").fetchall() == [("g1",)]


async def test_without_a_store_the_recorder_counts_and_opens_it_later(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the store's directory should be")
    recorder = Recorder(blocker / "lw.db", log=[].append)
    assert not recorder.open() and recorder.health.open is False
    recorder.add("events", "s1", event("s1", 1))
    await recorder.flush()
    assert recorder.health.unwritten == {"events": 1}
    blocker.unlink()
    blocker.mkdir()
    recorder._last_open_attempt = 0.0  # as if REOPEN_SECONDS had passed
    recorder.add("events", "s1", event("s1", 2))
    await recorder.flush()
    assert recorder.health.open is True
    assert stored(blocker / "lw.db", "s1") == [2]


async def test_the_backlog_is_bounded_by_bytes(tmp_path: Path) -> None:
    recorder = make(tmp_path)
    big = "x" * (1 << 20)
    n = 0
    while not recorder.over_backlog:
        n += 1
        assert recorder.add("events", "s1", event("s1", n, big), size=len(big))
    assert n * (1 << 20) >= records.BACKLOG_HIGH > (n - 1) * (1 << 20)
    await recorder.flush()
    assert not recorder.over_backlog and stored(tmp_path / "lw.db", "s1") == list(range(1, n + 1))


async def test_a_backlog_past_its_mark_is_written_at_once_not_after_the_batching_window(
        tmp_path: Path) -> None:
    """Pumps wait while the backlog is high: the flusher must not first wait out FLUSH_SECONDS (the live flood
    stored 35k of 60k events/s while every pump waited a window per round)."""
    recorder = make(tmp_path, flush_seconds=3600.0)  # a window no test would outlive
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run, lambda: None)
        await anyio.wait_all_tasks_blocked()  # the flusher sleeps, with nothing to write
        n = 0
        while not recorder.over_backlog:
            n += 1
            recorder.add("events", "s1", event("s1", n), size=64 << 10)
        with anyio.fail_after(10):
            await recorder.backpressure()  # as a session's pump does
        tg.cancel_scope.cancel()
    assert not recorder.over_backlog and stored(tmp_path / "lw.db", "s1")[:1] == [1]


async def test_events_past_the_cap_are_dropped_and_counted_not_queued(tmp_path: Path) -> None:
    recorder = make(tmp_path, pending_cap=3 * (2000 + records.ROW_OVERHEAD) + 1)
    kept = [recorder.add("events", "s1", event("s1", seq), size=2000) for seq in range(1, 6)]
    assert kept == [True, True, True, False, False]
    assert recorder.dropped == {"s1": 2}


def test_the_store_keeps_checkpoints_off_the_writers_path(tmp_path: Path) -> None:
    with Store.open(tmp_path / "lw.db") as store:
        store.defer_checkpoints()
        assert store.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        store.checkpoint()  # on a connection of its own


def test_a_store_that_opens_but_cannot_be_used_is_closed_and_not_used(tmp_path: Path) -> None:
    from loopwarden.runtime.store import StoreError

    opened: list[Store] = []

    def unusable(store: Store) -> None:
        opened.append(store)
        raise StoreError("database or disk is full")

    recorder = Recorder(tmp_path / "lw.db", log=[].append)
    recorder.on_open = unusable
    assert recorder.open() is False and recorder.store is None and recorder.health.open is False
    assert "disk is full" in str(recorder.health.last_error)
    with pytest.raises(sqlite3.ProgrammingError):  # closed: its file descriptors are not leaked
        opened[0].db.execute("SELECT 1")


async def test_encoded_event_rows_are_written_in_order_with_the_others_and_counted_when_lost(tmp_path: Path) -> None:
    recorder = make(tmp_path)
    assert recorder.store is not None
    recorder.add("events", "s1", event("s1", 1))
    recorder.add("events", "s1", ("s1", 2, 2.0, "output", '{"type":"output","text":"two","seq":2}'))
    recorder.add("events", "s1", event("s1", 3))
    await recorder.flush()
    assert stored(tmp_path / "lw.db", "s1") == [1, 2, 3]
    assert recorder.store.events("s1")[1]["data"] == {"type": "output", "text": "two", "seq": 2}
    recorder.store.db.execute("PRAGMA query_only = 1")  # SQLite refuses every write, as a full disk would
    recorder.add("events", "s2", ("s2", 1, 1.0, "output", '{"type":"output","text":"x","seq":1}'))
    await recorder.flush()
    assert recorder.health.unwritten == {"events": 1} and recorder.dropped == {"s2": 1}


def test_taking_whole_lanes_at_once_takes_what_one_entry_at_a_time_would(tmp_path: Path) -> None:
    import random
    from collections import deque

    def one_at_a_time(lanes: dict[str, deque], order: list[str], upto: int, most_rows: int, most_bytes: int,
                      within: bool) -> dict[str, list]:
        taken: dict[str, list] = {}
        rows = size = 0
        for lane in order:
            entries = lanes[lane]
            got = []
            while (entries and entries[0][0] <= upto and rows < most_rows
                   and (size + entries[0][3] <= most_bytes if within else size < most_bytes)):
                entry = entries.popleft()
                got.append(entry)
                rows += 1
                size += entry[3]
            if got:
                taken[lane] = got
            if rows >= most_rows or size >= most_bytes:
                break
        return taken

    rng = random.Random(16)
    recorder = Recorder(tmp_path / "lw.db", log=[].append)
    for _ in range(2000):
        recorder.lanes.clear()
        added = 0
        for lane in [f"s{i}" for i in range(rng.randint(1, 6))]:
            recorder.lanes[lane] = deque()
            for _ in range(rng.randint(0, 12)):
                added += rng.randint(1, 3)
                recorder.lanes[lane].append((added, "events", {}, rng.randint(1, 40)))
        copy = {lane: deque(entries) for lane, entries in recorder.lanes.items()}
        upto, most_rows, most_bytes = rng.randint(0, added + 1), rng.randint(1, 40), rng.randint(1, 400)
        within = rng.random() < 0.3
        expected = one_at_a_time(copy, list(copy), upto, most_rows, most_bytes, within)
        got = recorder._take(list(recorder.lanes), upto, most_rows, most_bytes, within=within)
        assert got == expected
        assert {k: list(v) for k, v in recorder.lanes.items() if v} == {k: list(v) for k, v in copy.items() if v}
