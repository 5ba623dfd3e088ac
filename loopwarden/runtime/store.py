"""The SQLite store: sessions, events, verdicts, gates, the audit log and spills.

Written by the daemon only, from one writer thread, one transaction per batch (`Store.write(Batch)`); one
connection, and every method holds the store's lock, so a read from another thread waits while a batch is
written. WAL mode with synchronous=NORMAL; the file, its -wal and -shm are 0600, a directory it creates 0700.
`meta` holds the schema's version N, meaning the first N of `MIGRATIONS` were applied; a newer file is refused.
The tables, their columns and why the store is built this way: docs/control.md, "The store".

Its rules, for every row:
* a row missing a NOT NULL column, or naming a column its table lacks, refuses its whole batch (gates rows
  accept `id` for `gate_id`, so `Gate.to_dict()` is stored as it is);
* ids are rowids (max + 1): only `prune` deletes rows, of ended sessions, so a live session's ids only grow,
  which the `after_id` cursors and the event runs rely on;
* a session's events are read through `event_runs` (each transaction's events of one session took the
  consecutive ids first_id..last_id), in id order; events have no index but their rowid;
* every text value, in a column or inside JSON, is cut to `text_cap` characters with a marker; a JSON document
  still longer than `json_cap` becomes {"truncated", "chars", "preview"}; lone surrogates become "?"; a value
  orjson cannot hold is stored as str(), and one nested past MAX_RECORD_DEPTH has its deeper parts replaced
  by a marker;
* an `env` or `env_keys` mapping is stored as its sorted keys, never its values;
* `mark_lost` fills an empty termination_text with LOST_TEXT; `record_lost` then says how each ended.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from ..supervisor.verdicts import FINAL_STATES
from .store_pages import HistoryPages
from .store_prune import Pruning
from .store_filter import EVERY_RECORD, RecordFilter
from .store_rows import EventRow, RowWriter
from .store_sql import EVENT_FROM, EVENT_IDS, HISTORY_TABLES, TABLES, StoreError, of_session, store_errors, transaction
from .store_values import APPEND, RowValues, clean, column_kinds, decode
from .worktrees import project_dir

__all__ = ["HISTORY_TABLES", "TABLES", "Batch", "EventRow", "Store", "StoreError", "max_session_number_readonly"]

TEXT_CAP = 64 * 1024
LOST_TEXT = "the session's process was gone when the daemon restarted"

_BUSY_TIMEOUT = 5.0
# a session not in a final state, as a WHERE clause (FINAL_STATES are its parameters)
_UNENDED = f"(state IS NULL OR state NOT IN ({', '.join('?' * len(FINAL_STATES))}))"
_WAL_KEPT = 64 << 20  # bytes of write-ahead log kept on disk after a checkpoint resets it




@dataclass(slots=True)
class Batch:
    """Rows written in one transaction; each row is a dict keyed by column name (or an `EventRow`)."""

    sessions_upsert: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any] | EventRow] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    gates_upsert: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    spills: list[dict[str, Any]] = field(default_factory=list)
    positions: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:  # (spelled out: a walk of dataclasses.fields cost more than a small write's rows)
        return (len(self.sessions_upsert) + len(self.events) + len(self.verdicts) + len(self.gates_upsert)
                + len(self.actions) + len(self.spills) + len(self.positions))


# ---- migrations: history, never edited once released ------------------------

def _v1_initial(db: Database) -> None:
    """Sessions, events, verdicts, gates, actions, spills."""
    db.create_table("sessions", {
        "id": str, "name": str, "adapter": str, "command": str, "cwd": str, "env_keys": str,
        "preset": str, "config": str, "task": str, "agent": str, "model": str, "state": str,
        "created_at": float, "started_at": float, "ended_at": float, "pid": int,
        "exit_code": int, "termination": str, "termination_text": str,
        "dropped_events": int, "handshake": int, "snapshot": str,
    }, pk="id", not_null={"id", "dropped_events"}, defaults={"dropped_events": 0})
    db.create_table("events", {
        "id": int, "session_id": str, "seq": int, "ts": float, "kind": str, "data": str,
    }, pk="id", not_null={"session_id", "kind"})
    db.create_table("verdicts", {
        "id": int, "session_id": str, "seq": int, "ts": float, "action": str, "rule": str,
        "reason": str, "message": str, "termination": str, "target": str, "gate_id": str,
        "evidence": str,
    }, pk="id", not_null={"session_id", "action"})
    db.create_table("gates", {
        "session_id": str, "gate_id": str, "rule": str, "reason": str, "opened_at": float,
        "seq": int, "evidence": str, "status": str, "decided_at": float, "decided_by": str,
        "note": str,
    }, pk=("session_id", "gate_id"), not_null={"session_id", "gate_id", "status"},
        defaults={"status": "pending"})
    db.create_table("actions", {
        "id": int, "ts": float, "actor": str, "client": str, "session_id": str, "action": str,
        "target": str, "note": str, "outcome": str,
    }, pk="id", not_null={"ts", "actor", "action"})
    db.create_table("spills", {
        "id": int, "session_id": str, "seq": int, "ts": float, "tool": str, "path": str,
        "size": int,
    }, pk="id", not_null={"session_id", "path"})
    for table in APPEND:
        db.table(table).create_index(["session_id", "id"], index_name=f"{table}_by_session")
    db.table("gates").create_index(["status"], index_name="gates_by_status")


def _v2_principals(db: Database) -> None:
    """The audit log records its principal precisely (runtime/principal.py); older rows read None."""
    actions = db.table("actions")
    for column, kind in (("client_kind", str), ("pid", int), ("uid", int), ("user", str), ("tty", str),
                         ("inside_session", str)):
        actions.add_column(column, kind)


def _v3_event_runs(db: Database) -> None:
    """A session's events are found through its runs (ranges of consecutive ids), not an index entry per event:
    the runs of the rows already stored are built from them (each session's consecutive ids), then the index goes."""
    db.execute("CREATE TABLE event_runs (first_id INTEGER PRIMARY KEY, last_id INTEGER NOT NULL,"
               " session_id TEXT NOT NULL)")
    db.execute("CREATE INDEX event_runs_by_session ON event_runs (session_id, last_id)")
    db.execute("INSERT INTO event_runs (first_id, last_id, session_id) SELECT min(id), max(id), session_id FROM"
               " (SELECT id, session_id, id - row_number() OVER (PARTITION BY session_id ORDER BY id) AS run"
               " FROM events) GROUP BY session_id, run")
    db.execute("DROP INDEX IF EXISTS events_by_session")


def _v4_lost(db: Database) -> None:
    """How a lost session ended (lost.py); the sessions already stored read None."""
    db.table("sessions").add_column("lost", str)


def _v5_conversations(db: Database) -> None:
    """The agent's own conversation id, so that a session continues in it (`loopwarden continue`); older rows
    read None."""
    db.table("sessions").add_column("conversation", str)


def _v6_positions(db: Database) -> None:
    """How far a kept agent's output is stored (keeper.py): the next daemon asks its keeper for the rest from there."""
    db.create_table("positions", {"session_id": str, "out_offset": int, "out_seq": int, "judged_seq": int,
                                  "err_offset": int}, pk="session_id", not_null={"session_id"})


def _v7_adapter_memory(db: Database) -> None:
    """What a kept agent's adapter knew when its output was stored (`Adapter.memory`); older rows read None."""
    db.table("positions").add_column("memory", str)


def _v8_usage_by_time(db: Database) -> None:
    """Usage events by time, for the day's spend the daemon rebuilds at its start (spending.py): a partial index,
    so the events of every other kind cost an insert nothing more."""
    db.execute("CREATE INDEX IF NOT EXISTS events_usage_by_ts ON events (ts) WHERE kind = 'usage'")


MIGRATIONS: list[Callable[[Database], None]] = [_v1_initial, _v2_principals, _v3_event_runs, _v4_lost,
                                                _v5_conversations, _v6_positions, _v7_adapter_memory,
                                                _v8_usage_by_time]
SCHEMA_VERSION = len(MIGRATIONS)


def _schema_version(db: Database) -> int:
    if "meta" not in db.table_names():
        return 0
    rows = list(db.query("SELECT value FROM meta WHERE key = 'schema_version'"))
    return int(rows[0]["value"]) if rows else 0


def _migrate(db: Database, where: Path) -> int:
    """Bring the file up to `len(MIGRATIONS)` in one transaction; refuse a newer file."""
    known = len(MIGRATIONS)
    with transaction(db.conn):
        found = _schema_version(db)
        if found > known:
            raise StoreError(f"{where} was written by a newer loopwarden (schema {found} > {known})")
        if found < known:
            db.create_table("meta", {"key": str, "value": str}, pk="key", not_null={"key"},
                            if_not_exists=True)
            for number, migration in enumerate(MIGRATIONS[found:], found + 1):
                try:
                    migration(db)
                except Exception as exc:
                    raise StoreError(f"{where}: migration {number} ({migration.__name__}) failed,"
                                     f" nothing changed: {exc}") from exc
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                       [str(known)])
    return known


class Store:
    """The daemon's database. Use `Store.open(path)`; every method is synchronous."""

    def __init__(self, db: Database, path: Path, schema_version: int, *,
                 text_cap: int = TEXT_CAP, json_cap: int | None = None) -> None:
        if text_cap < 1:
            raise ValueError("text_cap must be positive")
        self.db = db
        self.path = path
        self.schema_version = schema_version
        self.text_cap = text_cap
        self.json_cap = max(json_cap if json_cap is not None else 4 * text_cap, text_cap)
        self._lock = threading.RLock()
        self._kinds = {t: column_kinds(db, t) for t in (*TABLES, "positions")}
        self.values = RowValues(self._kinds, text_cap=text_cap, json_cap=self.json_cap)
        self.pages = HistoryPages(db, self._lock, path)  # what `logs` reads
        self.pruning = Pruning(db, self._lock, path)
        # (event runs always, but in a test that stops the migrations early)
        self.rows = RowWriter(db, self._kinds, self.values, runs="event_runs" in db.table_names())
        self._checkpointer: sqlite3.Connection | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, text_cap: int = TEXT_CAP,
             json_cap: int | None = None) -> Store:
        """Open (creating or migrating) the store at `path`. Raises StoreError."""
        if text_cap < 1:
            raise ValueError("text_cap must be positive")
        path = Path(path)
        try:
            if not path.parent.is_dir():
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.chmod(path.parent, 0o700)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                os.fchmod(fd, 0o600)
            finally:
                os.close(fd)
            conn = sqlite3.connect(path, timeout=_BUSY_TIMEOUT, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open {path}: {exc}") from exc
        try:
            db = Database(conn, execute_plugins=False)
            db.enable_wal()
            db.execute("PRAGMA synchronous=NORMAL")
            version = _migrate(db, path)
            for side in ("-wal", "-shm"):  # SQLite copies the file's mode; make sure
                try:
                    os.chmod(f"{path}{side}", 0o600)
                except FileNotFoundError:
                    pass
            return cls(db, path, version, text_cap=text_cap, json_cap=json_cap)
        except StoreError:
            conn.close()
            raise
        except (OSError, sqlite3.Error, ValueError) as exc:
            conn.close()
            raise StoreError(f"cannot open {path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._checkpointer is not None:
                self._checkpointer.close()
            self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing ------------------------------------------------------------
    def write(self, batch: Batch) -> None:
        """Write every row of `batch` in one transaction, or none of them (StoreError)."""
        if not batch:
            return
        with self._lock, store_errors(self.path):
            try:
                with transaction(self.db.conn):
                    rows = self.rows
                    for row in batch.sessions_upsert:
                        rows.upsert("sessions", row)
                    rows.append_events(batch.events)
                    prepare = self.values.prepare
                    rows.append("verdicts", [prepare("verdicts", r) for r in batch.verdicts])
                    for row in batch.gates_upsert:
                        rows.upsert("gates", row)
                    rows.append("actions", [prepare("actions", r) for r in batch.actions])
                    rows.append("spills", [prepare("spills", r) for r in batch.spills])
                    for row in batch.positions:
                        rows.upsert("positions", row)
            except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
                raise StoreError(f"batch of {len(batch)} rows not written: {exc}") from exc

    def defer_checkpoints(self) -> None:
        """Stop this connection from checkpointing the write-ahead log inside a commit (a checkpoint
        syncs the disk: a commit that runs one takes milliseconds); call `checkpoint` regularly instead."""
        with self._lock, store_errors(self.path):
            self.db.execute("PRAGMA wal_autocheckpoint=0")
            self.db.execute(f"PRAGMA journal_size_limit={_WAL_KEPT}")

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database on a connection of its own (any thread), so the
        writer never waits for it; PASSIVE, so it never blocks the writer either."""
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, check_same_thread=False)
        try:
            self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"checkpoint of {self.path} failed: {exc}") from exc

    def write_now(self, batch: Batch) -> bool:
        """Write `batch` if no other thread is using the store, without ever waiting for one: False when
        it is busy (nothing written). For a small batch someone waits on, from the event loop."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self.write(batch)
        finally:
            self._lock.release()
        return True

    def mark_lost(self, now: float, keep: Iterable[str] = (), only: Iterable[str] | None = None) -> list[str]:
        """Mark every session not in a final state (other than `keep`; of `only`, when given) as lost, ended now;
        their ids."""
        spare, among = set(keep), None if only is None else set(only)
        with self._lock, store_errors(self.path), transaction(self.db.conn):
            ids = [row[0] for row in self.db.execute(
                f"SELECT id FROM sessions WHERE {_UNENDED} ORDER BY created_at, rowid", FINAL_STATES)
                if row[0] not in spare and (among is None or row[0] in among)]
            self.db.conn.executemany(
                "UPDATE sessions SET state = 'lost', termination = 'lost', ended_at = ?,"
                " termination_text = coalesce(termination_text, ?) WHERE id = ?",
                [(now, LOST_TEXT, sid) for sid in ids])
        return ids

    def record_lost(self, session_id: str, text: str, lost: Mapping[str, Any], ended_at: float | None = None) -> bool:
        """How a lost session ended, in words (its termination_text) and as data (`lost`), and when, if better
        known than when it was marked; only while it is lost. Whether it was."""
        with self._lock, store_errors(self.path), transaction(self.db.conn):
            return self.db.execute(
                "UPDATE sessions SET termination_text = ?, lost = ?, ended_at = coalesce(?, ended_at)"
                " WHERE id = ? AND state = 'lost'",
                [clean(text, self.text_cap), self.values.json(dict(lost)), ended_at, session_id]).rowcount > 0

    # ---- reading ------------------------------------------------------------
    def sessions(self) -> list[dict[str, Any]]:
        """Every session, oldest first."""
        return self._select("sessions", "SELECT * FROM sessions ORDER BY created_at, rowid")

    def unended_in_pods(self) -> list[dict[str, Any]]:
        """The sessions not in a final state whose stored snapshot has a pod on a node (an earlier daemon's, at a
        start), oldest first: each one's id, and a snapshot holding only that pod. Only those rows are decoded,
        and only their pods, however many sessions an earlier daemon left."""
        return self._select(
            "sessions", "SELECT id, json_object('pod', json(json_extract(snapshot, '$.pod'))) AS snapshot"
            f" FROM sessions WHERE {_UNENDED} AND"
            " CASE WHEN json_valid(snapshot) THEN json_extract(snapshot, '$.pod.node') END IS NOT NULL"
            " ORDER BY created_at, rowid", FINAL_STATES)

    def session(self, session_id: str) -> dict[str, Any] | None:
        rows = self._select("sessions", "SELECT * FROM sessions WHERE id = ?", [session_id])
        return rows[0] if rows else None

    def position(self, session_id: str) -> tuple[int, int, int, int]:
        """Where a kept agent's stored output ends: (stdout offset, the stdout line seq there, the last stdout
        line seq whose events are stored, stderr offset); zeros before anything was stored."""
        with self._lock, store_errors(self.path):
            row = self.db.execute("SELECT out_offset, out_seq, err_offset, judged_seq FROM positions"
                                  " WHERE session_id = ?", [session_id]).fetchone()
            judged = self.db.execute(f"SELECT max(seq) FROM events WHERE id IN ({EVENT_IDS})",
                                     [session_id]).fetchone()[0]
        out, seq, err, taken = (int(v or 0) for v in row) if row else (0, 0, 0, 0)
        return out, seq, max(seq, taken, int(judged or 0)), err

    def adapter_memory(self, session_id: str) -> tuple[int, dict[str, Any]] | None:
        """What a kept agent's adapter knew at its last stored position (`Adapter.memory`), with the last stdout
        line seq it had read then; None when it had nothing to say or it cannot be read."""
        rows = self._select("positions", "SELECT judged_seq, memory FROM positions WHERE session_id = ?",
                            [session_id])
        memory = rows[0].get("memory") if rows else None
        return (int(rows[0].get("judged_seq") or 0), memory) if isinstance(memory, dict) else None

    def events(self, session_id: str, after_id: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """Up to `limit` events of a session with id > `after_id`, oldest first."""
        return self._page("events", session_id, after_id, limit)

    def calls(self, session_id: str, after_id: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """Up to `limit` tool calls and results of a session with id > `after_id`, oldest first."""
        sql = (f"SELECT e.* FROM {EVENT_FROM} AND r.last_id > ?2 AND e.id > ?2"
               " AND e.kind IN ('tool_call', 'tool_result') ORDER BY r.last_id, r.first_id, e.id LIMIT ?3")
        return self._select("events", sql, [session_id, int(after_id), max(0, int(limit))])

    def verdicts(self, session_id: str, after_id: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """Up to `limit` verdicts of a session with id > `after_id`, oldest first."""
        return self._page("verdicts", session_id, after_id, limit)

    def gates(self, session_id: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Gates, optionally of one session and/or one status, in the order they were opened."""
        where, params = self._where(session_id=session_id, status=status)
        return self._select("gates", f"SELECT * FROM gates{where} ORDER BY rowid", params)

    def actions(self, session_id: str | None = None, limit: int = 1000, *, action: str | None = None,
                actor: str | None = None, since: float | None = None) -> list[dict[str, Any]]:
        """The latest `limit` audit entries, oldest first: of one session, one action, at or after `since`, by
        an actor whose user or principal holds `actor` (case-insensitive), where given."""
        where, params = self._where(session_id=session_id, action=action)
        more: list[tuple[str, Any]] = [(" ts >= ?", since)] if since is not None else []
        if actor:
            more.append((" instr(lower(coalesce(user, '') || ' ' || actor), lower(?)) > 0", actor))
        for sql, value in more:
            where += (" AND" if where else " WHERE") + sql
            params.append(value)
        return self._select("actions", f"SELECT * FROM (SELECT * FROM actions{where}"
                                       " ORDER BY id DESC LIMIT ?) ORDER BY id",
                            [*params, max(0, int(limit))])

    def spills(self, session_id: str, limit: int = 1_000_000) -> list[dict[str, Any]]:
        """The newest `limit` spill files of a session, oldest first."""
        rows = self._select("spills", "SELECT * FROM spills WHERE session_id = ? ORDER BY id DESC LIMIT ?",
                            [session_id, max(0, int(limit))])
        rows.reverse()
        return rows

    def count(self, table: str, session_id: str | None = None) -> int:
        """Rows in `table`, optionally of one session."""
        if table not in TABLES:
            raise ValueError(f"no table {table!r}")
        if table == "events" and session_id is not None:
            sql, params = f"SELECT count(*) AS n FROM ({EVENT_IDS})", [session_id]
        else:
            where, params = self._where(**{"id" if table == "sessions" else "session_id": session_id})
            sql = f"SELECT count(*) AS n FROM {table}{where}"
        with self._lock, store_errors(self.path):
            n: int = next(iter(self.db.query(sql, params)))["n"]
            return n

    def tool_calls(self, session_id: str) -> int:
        """How many tool calls of a session are stored."""
        with self._lock, store_errors(self.path):
            row = self.db.execute(f"SELECT count(*) FROM events WHERE id IN ({EVENT_IDS}) AND kind = 'tool_call'",
                                  [session_id]).fetchone()
        return int(row[0])

    def spend_since(self, since: float) -> list[tuple[float, str | None, float]]:
        """Every usage event since `since` that cost something: (its time, where its session works for the budgets
        (`worktrees.project_dir`: a worktree session's checkout, else its working directory), its dollars), through
        the usage index (no scan of the other events)."""
        sql = ("SELECT e.ts, s.cwd, json_extract(s.snapshot, '$.worktree.checkout'),"
               " json_extract(s.snapshot, '$.worktree.subdir'),"
               " CAST(json_extract(e.data, '$.cost_usd') AS REAL) AS usd FROM events e"
               " INDEXED BY events_usage_by_ts LEFT JOIN sessions s ON s.id = e.session_id"
               " WHERE e.kind = 'usage' AND e.ts >= ? AND usd > 0")
        with self._lock, store_errors(self.path):
            rows = self.db.execute(sql, [since]).fetchall()
        return [(float(ts), project_dir(cwd, checkout, subdir), float(usd)) for ts, cwd, checkout, subdir, usd in rows]

    def last(self, table: str, session_id: str, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` events or verdicts of a session, oldest first."""
        if table not in ("events", "verdicts"):
            raise StoreError(f"last() reads events or verdicts, not {table!r}")
        rows = self._select(table, of_session(table, newest=True) + " LIMIT ?2", [session_id, max(0, int(limit))])
        rows.reverse()
        return rows

    def find_sessions(self, ref: str, limit: int = 10) -> list[dict[str, Any]]:
        """The session with this id, else the newest `limit` with this name (several: the name is ambiguous)."""
        rows = self._select("sessions", "SELECT * FROM sessions WHERE id = ?", [ref])
        if not rows:
            rows = self._select("sessions", "SELECT * FROM sessions WHERE name = ? ORDER BY rowid DESC LIMIT ?",
                                [ref, max(1, int(limit))])
        return rows

    def recent_sessions(self, max_bytes: int, before: str | None = None, limit: int = 100_000
                        ) -> list[dict[str, Any]]:
        """The newest sessions (older than session `before`, if given) whose stored snapshots fit in
        `max_bytes`, at most `limit` of them, oldest first: what a bounded view of history reads."""
        where, params = "", []
        if before is not None:  # created_at orders sessions; rowid only breaks ties (rows are upserted in batches)
            where, params = (" WHERE (coalesce(created_at, 0), rowid) <"
                             " (SELECT coalesce(created_at, 0), rowid FROM sessions WHERE id = ?)"), [before]
        sql = f"SELECT * FROM sessions{where} ORDER BY coalesce(created_at, 0) DESC, rowid DESC LIMIT ?"
        with self._lock, store_errors(self.path):
            rows = self.pages.bounded("sessions", sql, [*params, max(0, int(limit))], max_bytes)[0]
        rows.reverse()
        return decode("sessions", rows)

    def spill_settings(self, default_dir: str, default_retention: float, limit: int = 10_000
                       ) -> list[tuple[str, str, float]]:
        """(session, spill dir, retention) of sessions whose spill settings were not the defaults, from
        their stored snapshots, read inside SQLite (history is never loaded whole for this)."""
        with self._lock, store_errors(self.path):
            rows = self.db.execute(
                "SELECT id, json_extract(snapshot, '$.spill.dir'), json_extract(snapshot, '$.spill.retention')"
                " FROM sessions WHERE json_extract(snapshot, '$.spill.dir') IS NOT NULL AND"
                " (json_extract(snapshot, '$.spill.dir') != ? OR json_extract(snapshot, '$.spill.retention') != ?)"
                " ORDER BY rowid DESC LIMIT ?", [default_dir, default_retention, limit]).fetchall()
        return [(sid, str(d), float(r or 0)) for sid, d, r in rows]

    def max_session_number(self) -> int:
        """The largest N of the session ids sN (0 when there are none)."""
        with self._lock, store_errors(self.path):
            row = self.db.execute("SELECT max(CAST(substr(id, 2) AS INTEGER)) FROM sessions"
                                  " WHERE id GLOB 's[0-9]*'").fetchone()
        return int(row[0] or 0)

    def history(self, session_id: str, after: Mapping[str, int], *, limit: int, max_bytes: int,
                tables: Iterable[str] = HISTORY_TABLES, only: RecordFilter = EVERY_RECORD
                ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int], bool]:
        """One page of a session's history after the given ids (HistoryPages.history)."""
        return self.pages.history(session_id, after, limit=limit, max_bytes=max_bytes, tables=tables, only=only)

    def newest(self, session_id: str, *, limit: int, max_bytes: int, tables: Iterable[str] = HISTORY_TABLES,
               only: RecordFilter = EVERY_RECORD) -> tuple[dict[str, list[dict[str, Any]]], bool]:
        """A session's newest records (HistoryPages.newest)."""
        return self.pages.newest(session_id, limit=limit, max_bytes=max_bytes, tables=tables, only=only)

    def newest_start(self, session_id: str, table: str, n: int, only: RecordFilter = EVERY_RECORD) -> int:
        """The id to read after to get the newest `n` rows of a session in `table` (HistoryPages.newest_start)."""
        return self.pages.newest_start(session_id, table, n, only)

    def prune(self, ended_before: float, audit_before: float | None = None, *, chunk: int = 50) -> dict[str, int]:
        """Delete the history of sessions ended before `ended_before`, and audit rows older than `audit_before`
        (Pruning.prune); rows deleted, by table."""
        return self.pruning.prune(ended_before, audit_before, chunk=chunk)

    def prunable(self, ended_before: float, audit_before: float | None = None) -> dict[str, int]:
        """What `prune` with the same arguments would delete, by table."""
        return self.pruning.prunable(ended_before, audit_before)

    def _page(self, table: str, session_id: str, after_id: int, limit: int) -> list[dict[str, Any]]:
        return self._select(table, of_session(table, after=True) + " LIMIT ?3",
                            [session_id, int(after_id), max(0, int(limit))])

    @staticmethod
    def _where(**equal: Any) -> tuple[str, list[Any]]:
        pairs = [(k, v) for k, v in equal.items() if v is not None]
        if not pairs:
            return "", []
        return " WHERE " + " AND ".join(f"{k} = ?" for k, _ in pairs), [v for _, v in pairs]

    def _select(self, table: str, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        with self._lock, store_errors(self.path):
            rows = list(self.db.query(sql, list(params)))
        return decode(table, rows)

def max_session_number_readonly(path: str | os.PathLike[str]) -> int:
    """The largest session number in a store that cannot be opened for writing (a full disk): read
    without locks or the write-ahead log, so it may miss what an unclean stop left there. 0 if unreadable."""
    try:
        conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro&immutable=1", uri=True)
        try:
            row = conn.execute("SELECT max(CAST(substr(id, 2) AS INTEGER)) FROM sessions"
                               " WHERE id GLOB 's[0-9]*'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return 0
    return int(row[0] or 0)
