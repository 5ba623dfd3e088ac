"""SQLite's part of storing the flood's event rows, by way of inserting: plain sqlite3, no loopwarden.

    .venv/bin/python bench/events_insert.py VARIANT ROWS
    # instructions per row: (ROWS=40000 - ROWS=10000) / 30,000 under valgrind, minus the same for `gen`
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        .venv/bin/python bench/events_insert.py base 40000

Rows like the daemon's for tests/agents/paced_flood.py's lines (50 sessions, 12 rows of a session after another),
written in 1,000-row transactions into a WAL file with the events table of schema 2. VARIANT:
  gen            the rows built, nothing written (subtract it)
  base           executemany, the (session_id, id) index (schema 2, main before this round)
  noidx          executemany, no index
  wr             a WITHOUT ROWID table keyed (session_id, id), ids given
  multiN         N rows per INSERT statement (the rest by executemany), the index
  multiNnoidx    the same without the index
Prints the thread CPU per row (noisy on a shared machine; the instruction counts are the figure). Always exits 0.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "agents"))

from paced_flood import event_line

SESSIONS, PER_CHUNK, TXN = 50, 12, 1000
ONE = "INSERT INTO events (session_id, seq, ts, kind, data) VALUES (?,?,?,?,?)"


def rows(n: int) -> list[tuple[str, int, float, str, str]]:
    out: list[tuple[str, int, float, str, str]] = []
    seq = [0] * SESSIONS
    while len(out) < n:
        for s in range(SESSIONS):
            for _ in range(PER_CHUNK):
                seq[s] += 1
                data = event_line(seq[s], 1000.0)[:-2] + f',"seq":{seq[s]}}}'
                kind = data.split('"type":"')[1].split('"')[0]
                out.append((f"s{s}", seq[s], 1795569172.04563 + len(out) * 1e-5, kind, data))
    return out[:n]


def main(argv: list[str]) -> int:
    variant, n = argv[0], int(argv[1])
    data = rows(n)
    if variant == "gen":
        return 0
    home = tempfile.mkdtemp(prefix="events-insert-")
    try:
        conn = sqlite3.connect(os.path.join(home, "x.db"), isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "wal_autocheckpoint=0"):
            conn.execute(f"PRAGMA {pragma}")
        if variant == "wr":
            conn.execute("CREATE TABLE events (id INTEGER NOT NULL, session_id TEXT NOT NULL, seq INTEGER, ts REAL,"
                         " kind TEXT NOT NULL, data TEXT, PRIMARY KEY (session_id, id)) WITHOUT ROWID")
        else:
            conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER, ts REAL,"
                         " kind TEXT NOT NULL, data TEXT)")
            if not variant.endswith("noidx"):
                conn.execute("CREATE INDEX events_by_session ON events (session_id, id)")
        per = int(variant[5:].replace("noidx", "") or 100) if variant.startswith("multi") else 0
        many = ("INSERT INTO events (session_id, seq, ts, kind, data) VALUES " + ",".join(["(?,?,?,?,?)"] * per)
                if per else "")
        next_id = 1
        t0 = time.thread_time()
        for start in range(0, n, TXN):
            batch = data[start:start + TXN]
            conn.execute("BEGIN IMMEDIATE")
            if variant == "wr":
                conn.executemany("INSERT INTO events (id, session_id, seq, ts, kind, data) VALUES (?,?,?,?,?,?)",
                                 [(next_id + k, *r) for k, r in enumerate(batch)])
                next_id += len(batch)
            elif per:
                whole = len(batch) - len(batch) % per
                for k in range(0, whole, per):
                    conn.execute(many, [v for r in batch[k:k + per] for v in r])
                if whole < len(batch):
                    conn.executemany(ONE, batch[whole:])
            else:
                conn.executemany(ONE, batch)
            conn.execute("COMMIT")
        took = time.thread_time() - t0
        conn.close()
    finally:
        shutil.rmtree(home)
    print(f"{variant}: {n:,} rows, {took / n * 1e6:.2f} us of thread CPU per row")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
