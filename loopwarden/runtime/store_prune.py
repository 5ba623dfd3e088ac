"""Pruning the store: the history of sessions ended long ago, and old audit rows, deleted a few at a time."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlite_utils import Database

from ..supervisor.verdicts import FINAL_STATES
from .store_sql import EVENT_IDS, RUN_EVENTS, TABLES, store_errors, transaction


class Pruning:
    """Deletes (or counts) what is past retention, on the store's connection, under its lock."""

    def __init__(self, db: Database, lock: threading.RLock, path: Path) -> None:
        self.db = db
        self.lock = lock
        self.path = path

    def prune(self, ended_before: float, audit_before: float | None = None, *, chunk: int = 50) -> dict[str, int]:
        """Delete sessions that ended before `ended_before` with everything they recorded, and audit
        rows older than `audit_before` (None keeps them), a few sessions per transaction so the
        daemon's writes never wait long. Live sessions are never touched. Rows deleted, by table."""
        deleted = {t: 0 for t in TABLES}
        marks = ", ".join("?" * len(FINAL_STATES))
        while True:
            with self.lock, store_errors(self.path), transaction(self.db.conn):
                ids = [r[0] for r in self.db.execute(
                    f"SELECT id FROM sessions WHERE state IN ({marks}) AND coalesce(ended_at, created_at) < ?"
                    " LIMIT ?", [*FINAL_STATES, ended_before, chunk])]
                for sid in ids:
                    deleted["events"] += self.db.execute(f"DELETE FROM events WHERE id IN ({EVENT_IDS})",
                                                         [sid]).rowcount
                    self.db.execute("DELETE FROM event_runs WHERE session_id = ?", [sid])
                    self.db.execute("DELETE FROM positions WHERE session_id = ?", [sid])
                    for table in ("verdicts", "gates", "spills"):
                        deleted[table] += self.db.execute(f"DELETE FROM {table} WHERE session_id = ?",
                                                          [sid]).rowcount
                    deleted["sessions"] += self.db.execute("DELETE FROM sessions WHERE id = ?", [sid]).rowcount
            if len(ids) < chunk:
                break
        if audit_before is not None:
            while True:
                with self.lock, store_errors(self.path), transaction(self.db.conn):
                    n = self.db.execute("DELETE FROM actions WHERE id IN (SELECT id FROM actions WHERE ts < ?"
                                        " LIMIT ?)", [audit_before, chunk * 100]).rowcount
                deleted["actions"] += n
                if n < chunk * 100:
                    break
        return deleted

    def prunable(self, ended_before: float, audit_before: float | None = None) -> dict[str, int]:
        """What `prune` with the same arguments would delete, by table."""
        marks = ", ".join("?" * len(FINAL_STATES))
        old = (f"SELECT id FROM sessions WHERE state IN ({marks}) AND coalesce(ended_at, created_at) < ?")
        params = [*FINAL_STATES, ended_before]
        counts = {t: 0 for t in TABLES}
        with self.lock, store_errors(self.path):
            counts["sessions"] = self.db.execute(f"SELECT count(*) FROM ({old})", params).fetchone()[0]
            counts["events"] = self.db.execute(f"SELECT count(*) FROM {RUN_EVENTS} WHERE r.session_id IN ({old})",
                                               params).fetchone()[0]
            for table in ("verdicts", "gates", "spills"):
                counts[table] = self.db.execute(f"SELECT count(*) FROM {table} WHERE session_id IN ({old})",
                                                params).fetchone()[0]
            if audit_before is not None:
                counts["actions"] = self.db.execute("SELECT count(*) FROM actions WHERE ts < ?",
                                                    [audit_before]).fetchone()[0]
        return counts
