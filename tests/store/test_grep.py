"""`logs --grep` in the store: a row that cannot hold the text is passed over cheaply, the text is found wherever
it is in a record's values (escaped in the stored JSON or not), and a followed record matches as a stored one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwarden.runtime.store import Batch, Store
from loopwarden.runtime.store_filter import RecordFilter

NOW = 1_700_000_000.0
ROWS = 500


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "store.db")
    s.write(Batch(sessions_upsert=[{"id": "s1", "name": "s1", "state": "running", "created_at": NOW}],
                  events=[{"session_id": "s1", "seq": i, "ts": NOW + i, "kind": "tool_result",
                           "data": {"type": "tool_result", "tool": "bash", "args": {"cmd": f"make test {i}"},
                                    "output": f"line {i} of the build\n" * 8}} for i in range(ROWS)]
                  + [{"session_id": "s1", "seq": ROWS, "ts": NOW + ROWS, "kind": "tool_result",
                      "data": {"type": "tool_result", "output": 'said "Quoted\\Thing"\tÉté'}}]))
    yield s
    s.close()


def steps(store: Store, only: RecordFilter) -> int:
    """SQLite's virtual-machine steps (in hundreds) to find where the newest 10 matching events start."""
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    store.db.conn.set_progress_handler(tick, 100)
    try:
        store.newest_start("s1", "events", 10, only)
    finally:
        store.db.conn.set_progress_handler(None, 100)
    return count[0]


def test_a_grep_that_matches_nothing_costs_about_a_plain_scan(store: Store) -> None:
    scan = steps(store, RecordFilter(since=NOW + 10 * ROWS))  # every row read, none kept
    grep = steps(store, RecordFilter(grep="no such text anywhere"))
    assert grep < 3 * scan, (grep, scan)  # not a walk of every value of every record


@pytest.mark.parametrize("text", ['"quoted\\thing"', "thing\"\tÉté", "MAKE TEST 7", "line 3 of"])
def test_grep_finds_text_escaped_in_the_stored_json_too(store: Store, text: str) -> None:
    rows, _ = store.newest("s1", limit=1000, max_bytes=4 << 20, tables=["events"], only=RecordFilter(grep=text))
    assert rows["events"]


def test_grep_never_matches_a_field_name(store: Store) -> None:
    rows, _ = store.newest("s1", limit=1000, max_bytes=4 << 20, tables=["events"], only=RecordFilter(grep="output"))
    assert not rows["events"]


@pytest.mark.parametrize(("text", "stored"), [("Été", True), ("été", False), ("make TEST 7", True)])
def test_a_followed_record_matches_as_the_store_would(store: Store, text: str, stored: bool) -> None:
    """`logs -f --grep`: a new record passes exactly when the store's query would keep it (case folded for ASCII
    letters alone, as SQLite's lower() does), so the stored and the followed lines agree."""
    rows, _ = store.newest("s1", limit=1000, max_bytes=4 << 20, tables=["events"], only=RecordFilter(grep=text))
    live = [e for e in store.events("s1", limit=1000) if RecordFilter(grep=text).matches("event", e["data"], None)]
    assert bool(rows["events"]) is stored and [e["id"] for e in live] == [e["id"] for e in rows["events"]]
