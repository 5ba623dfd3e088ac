"""Pages of a session's stored history, bounded by rows and by bytes: what `logs` and the console read."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from .store_filter import EVERY_RECORD, RecordFilter
from .store_sql import HISTORY_TABLES, StoreError, of_session, store_errors
from .store_values import decode


def row_size(row: Mapping[str, Any]) -> int:
    """The bytes a stored row's text takes, roughly (what a page of history is bounded by)."""
    return 64 + sum(len(v) for v in row.values() if isinstance(v, (str, bytes)))


class HistoryPages:
    """Reads pages of history on the store's connection, under its lock."""

    def __init__(self, db: Database, lock: threading.RLock, path: Path) -> None:
        self.db = db
        self.lock = lock
        self.path = path

    def history(self, session_id: str, after: Mapping[str, int], *, limit: int, max_bytes: int,
                tables: Iterable[str] = HISTORY_TABLES, only: RecordFilter = EVERY_RECORD
                ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int], bool]:
        """One page of a session's events, verdicts and actions after the given ids (those `only` passes), merged
        by time: ({table: rows}, {table: last id read}, more). The page ends when a table has `limit` rows or
        the rows' text passes `max_bytes` (the first row is always taken, so paging always moves)."""
        wanted = [t for t in HISTORY_TABLES if t in set(tables)]
        cursor = {t: int(after.get(t, 0) or 0) for t in HISTORY_TABLES}
        out: dict[str, list[dict[str, Any]]] = {t: [] for t in HISTORY_TABLES}
        with self.lock, store_errors(self.path):
            streams = [self._stream(t, session_id, cursor[t], only) for t in wanted]
            used, more = 0, False
            for _, _, _, table, row, size in heapq.merge(*streams):
                if out[table] and (used + size > max_bytes or len(out[table]) >= limit):
                    more = True
                    break
                if used + size > max_bytes and any(out.values()):
                    more = True
                    break
                out[table].append(row)
                cursor[table] = row["id"]
                used += size
        for table, rows in out.items():
            decode(table, rows)
        return out, cursor, more

    def newest_start(self, session_id: str, table: str, n: int, only: RecordFilter = EVERY_RECORD) -> int:
        """The id to read after to get the newest `n` rows of a session in `table` (of those `only` passes)."""
        if table not in HISTORY_TABLES:
            raise StoreError(f"no history table {table!r}")
        where, values = only.clause(table, 2)
        with self.lock, store_errors(self.path):
            row = self.db.execute(of_session(table, newest=True, what="id", where=where)
                                  + f" LIMIT 1 OFFSET ?{2 + len(values)}",
                                  [session_id, *values, max(0, int(n))]).fetchone()
        return int(row[0]) if row else 0

    def newest(self, session_id: str, *, limit: int, max_bytes: int, tables: Iterable[str] = HISTORY_TABLES,
               only: RecordFilter = EVERY_RECORD) -> tuple[dict[str, list[dict[str, Any]]], bool]:
        """A session's newest records (those `only` passes), at most `limit` of each table and `max_bytes` of
        text in all, oldest first; and whether older ones were left out."""
        per: dict[str, list[tuple[float, int, dict[str, Any], int]]] = {}
        more = False
        with self.lock, store_errors(self.path):
            for table in [t for t in HISTORY_TABLES if t in set(tables)]:
                where, values = only.clause(table, 2)
                rows, cut = self.bounded(table, of_session(table, newest=True, where=where)
                                         + f" LIMIT ?{2 + len(values)}", [session_id, *values, max(0, int(limit))],
                                         max_bytes)
                more = more or cut or len(rows) == limit
                per[table] = [(row.get("ts") or 0.0, row["id"], row, row_size(row)) for row in rows]
        merged = sorted(((ts, rid, t, row, size) for t, rows in per.items() for ts, rid, row, size in rows),
                        reverse=True)
        out: dict[str, list[dict[str, Any]]] = {t: [] for t in HISTORY_TABLES}
        used = 0
        for _, _, table, row, size in merged:  # newest first, until the byte budget is spent
            if used + size > max_bytes and any(out.values()):
                more = True
                break
            out[table].append(row)
            used += size
        for table, rows in out.items():
            rows.reverse()
            decode(table, rows)
        return out, more

    def _stream(self, table: str, session_id: str, after_id: int, only: RecordFilter
                ) -> Iterator[tuple[float, int, int, str, dict[str, Any], int]]:
        """Rows after `after_id`, undecoded, as (ts, order, id, table, row, text size), read lazily."""
        order = HISTORY_TABLES.index(table)
        where, values = only.clause(table, 3)
        cur = self.db.conn.execute(of_session(table, after=True, where=where), [session_id, after_id, *values])
        names = [d[0] for d in cur.description]
        while True:
            chunk = cur.fetchmany(64)
            if not chunk:
                return
            for values in chunk:
                row = dict(zip(names, values, strict=True))
                yield row.get("ts") or 0.0, order, row["id"], table, row, row_size(row)

    def bounded(self, table: str, sql: str, params: list[Any], max_bytes: int
                 ) -> tuple[list[dict[str, Any]], bool]:
        """Undecoded rows of a query until their text passes `max_bytes` (at least one); and whether cut."""
        cur = self.db.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        rows: list[dict[str, Any]] = []
        used = 0
        while True:
            chunk = cur.fetchmany(64)
            if not chunk:
                return rows, False
            for values in chunk:
                row = dict(zip(names, values, strict=True))
                used += row_size(row)
                if rows and used > max_bytes:
                    cur.close()
                    return rows, True
                rows.append(row)
