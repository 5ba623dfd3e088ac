"""What the store's parts share of SQLite: the store's one error, a transaction, and the queries of a session's
rows (its events found through their runs)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TABLES = ("sessions", "events", "verdicts", "gates", "actions", "spills")
HISTORY_TABLES = ("events", "verdicts", "actions")  # what `history` pages through, merged by time

# a session's events, found through its runs: the runs in order, each a range of the table's ids (a plan of two
# searches, no sort: tests/store/test_store.py holds the plans to it)
RUN_EVENTS = "event_runs r CROSS JOIN events e ON e.id BETWEEN r.first_id AND r.last_id"
EVENT_FROM = f"{RUN_EVENTS} WHERE r.session_id = ?1"
EVENT_IDS = f"SELECT e.id FROM {EVENT_FROM}"


class StoreError(Exception):
    """The store cannot be opened, or a batch was refused (and nothing of it was written)."""


@contextmanager
def store_errors(where: Path) -> Iterator[None]:
    """SQLite's errors as StoreError, naming the file."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"{where}: {exc}") from exc


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def of_session(table: str, *, after: bool = False, newest: bool = False, what: str = "*", where: str = "") -> str:
    """The query of a session's rows of `table` (?1), after an id (?2) if `after`, oldest or newest first,
    with `where` (` AND ...`, runtime/store_filter.py) too; the caller adds a LIMIT (numbered after these)."""
    way = " DESC" if newest else ""
    if table != "events":
        return (f"SELECT {what} FROM {table} WHERE session_id = ?1" + (" AND id > ?2" if after else "")
                + where + f" ORDER BY id{way}")
    return (f"SELECT e.{what} FROM {EVENT_FROM}" + (" AND r.last_id > ?2 AND e.id > ?2" if after else "")
            + where + f" ORDER BY r.last_id{way}, r.first_id{way}, e.id{way}")
