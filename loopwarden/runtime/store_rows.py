"""How a batch's rows go into SQLite: appended (events in multi-row statements, with their runs) or upserted, by
statements made once per table and columns. On the store's connection, inside its transaction and lock."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain, groupby
from operator import itemgetter
from typing import Any

import orjson
from sqlite_utils import Database

from .store_sql import StoreError
from .store_values import RowValues

_KEYS = {"sessions": ("id",), "gates": ("session_id", "gate_id"), "positions": ("session_id",)}
_EVENT_COLUMNS = ("session_id", "seq", "ts", "kind", "data")  # an events row, in the table's order
_EVENT_KEYS = frozenset(_EVENT_COLUMNS)
_ONLY_TUPLES, _DATA = {tuple}, itemgetter(4)  # the daemon's queued event rows, and their data
# event rows inserted by one statement: executemany binds and steps once per row, releasing and taking the
# interpreter lock each time; 100 rows of one multi-row INSERT cost ~4k instructions a row less (of ~17k)
_ROWS_PER_INSERT = 100

# an events row in the table's column order, its data JSON text already (the daemon's typed lines): written as
# it is when the text is within the text cap, which then holds for every string in it
EventRow = tuple[str, int, float, str, str]


class RowWriter:
    """Writes prepared rows of the store's tables; the caller holds the lock and the transaction."""

    def __init__(self, db: Database, kinds: dict[str, dict[str, str]], values: RowValues, *, runs: bool) -> None:
        self.conn = db.conn
        self.kinds = kinds
        self.values = values
        self.runs = runs  # whether the events' runs are recorded (event_runs exists)
        self._insert_sql: dict[str, tuple[tuple[str, ...], str]] = {}
        self._upsert_sql: dict[tuple[str, tuple[str, ...]], str] = {}
        self._events_many: tuple[tuple[str, ...], str] | None = None

    def append(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Insert prepared rows (the hot path: one executemany)."""
        if not rows:
            return
        cols, sql = self._insert(table)
        self.conn.executemany(sql, [[r.get(c) for c in cols] for r in rows])

    def append_events(self, rows: list[dict[str, Any] | EventRow]) -> None:
        """Insert event rows. The rows the daemon queues (its five columns, short ASCII ids, a dict of
        data) skip `prepare`: nothing in them needs cleaning but the data, encoded as `prepare` would.
        An `EventRow` within the text cap is written as it is."""
        if not rows:
            return
        cols, sql = self._insert("events")
        values: list[tuple[Any, ...]] = []
        fast = cols == _EVENT_COLUMNS
        cap = self.values.text_cap
        json, prepare = self.values.json, self.values.prepare
        if fast and set(map(type, rows)) == _ONLY_TUPLES and max(map(len, map(_DATA, rows))) <= cap:
            values = rows  # type: ignore[assignment]  # all EventRows within the cap: as they are (checked in C)
            rows = []
        for each in rows:
            if isinstance(each, tuple):
                if fast and len(each[4]) <= cap:
                    values.append(each)
                    continue
                row = dict(zip(_EVENT_COLUMNS, (*each[:4], orjson.loads(each[4])), strict=True))
            else:
                row = each
            sid, kind, data = row.get("session_id"), row.get("kind"), row.get("data")
            if (fast and type(sid) is str and type(kind) is str and type(data) is dict and len(row) == 5
                    and row.keys() == _EVENT_KEYS and len(sid) + len(kind) < 512 and sid.isascii() and kind.isascii()):
                values.append((sid, row["seq"], row["ts"], kind, json(data)))
            else:
                prepared = prepare("events", row)
                values.append(tuple(prepared.get(c) for c in cols))
        conn = self.conn
        base = conn.execute("SELECT max(id) FROM events").fetchone()[0] or 0
        whole = len(values) - len(values) % _ROWS_PER_INSERT
        if whole:  # _ROWS_PER_INSERT rows per statement: one bind and one step each, not one per row
            many = self._insert_many(cols)
            for start in range(0, whole, _ROWS_PER_INSERT):
                conn.execute(many, list(chain.from_iterable(values[start:start + _ROWS_PER_INSERT])))
        if whole < len(values):
            conn.executemany(sql, values[whole:] if whole else values)
        if not self.runs:
            return
        # the rows took the ids after the largest (SQLite's rule short of 2**63 - 1): the runs are checked, not assumed
        if conn.execute("SELECT max(id) FROM events").fetchone()[0] != base + len(values):
            raise StoreError("event ids did not follow the largest one: the runs cannot be recorded")
        runs, first = [], base + 1
        for sid, group in groupby(map(itemgetter(cols.index("session_id")), values)):
            last = first + len(list(group)) - 1
            runs.append((first, last, sid))
            first = last + 1
        conn.executemany("INSERT INTO event_runs (first_id, last_id, session_id) VALUES (?, ?, ?)", runs)

    def _insert_many(self, cols: tuple[str, ...]) -> str:
        """The events statement that inserts _ROWS_PER_INSERT rows of `cols`, in their order."""
        if self._events_many is None or self._events_many[0] != cols:
            one = f"({', '.join('?' * len(cols))})"
            self._events_many = cols, (f"INSERT INTO events ({', '.join(cols)}) VALUES "
                                       + ", ".join([one] * _ROWS_PER_INSERT))
        return self._events_many[1]

    def _insert(self, table: str) -> tuple[tuple[str, ...], str]:
        """The columns an append names, and its statement."""
        if table not in self._insert_sql:
            cols = tuple(c for c in self.kinds[table] if c != "id")
            self._insert_sql[table] = cols, (
                f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})")
        return self._insert_sql[table]

    def upsert(self, table: str, row: Mapping[str, Any]) -> None:
        """Insert a row, or update only the columns it names."""
        row = self.values.prepare(table, row)
        keys = _KEYS[table]
        missing = [k for k in keys if row.get(k) is None]
        if missing:
            raise StoreError(f"{table} row without {', '.join(missing)}")
        cols = tuple(row)
        sql = self._upsert_sql.get((table, cols))
        if sql is None:
            updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in keys)
            sql = (f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
                   f" ON CONFLICT ({', '.join(keys)}) DO "
                   + (f"UPDATE SET {updates}" if updates else "NOTHING"))
            self._upsert_sql[table, cols] = sql
        self.conn.execute(sql, tuple(row.values()))
