"""Store throughput: events/s through `Store.write`, executemany (the store) vs sqlite-utils insert_all.

Two measurements, each writing EVENTS events in batches of BATCH (one transaction
per batch) to a fresh file, over ROUNDS rounds. Printed: wall-clock events/s (best
and median) and events per CPU second of this process (median), which other load
on the machine disturbs least:

* the whole `Store.write` path (column checks, JSON encoding, capping), with only
  the final insert swapped;
* the insert step alone, on rows the store has already prepared.

    .venv/bin/python bench/store_throughput.py [--events 200000] [--batch 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from loopwarden.runtime.store import Batch, Store

try:
    from loopwarden.runtime.store_sql import transaction
except ImportError:  # an older checkout: the store held it
    from loopwarden.runtime.store import _transaction as transaction  # type: ignore[attr-defined,no-redef]


class InsertAllStore(Store):
    """The same store with sqlite-utils' insert_all on the hot path.

    On sqlite-utils 4.x insert_all joins the open transaction through a savepoint;
    on 3.x it would commit it, so this variant is only a speed reference.
    """

    def _append(self, table: str, rows: list[dict[str, Any]]) -> None:
        if rows:
            self.db[table].insert_all(rows, batch_size=len(rows))


def make_events(n: int) -> list[dict[str, Any]]:
    """A realistic mix: tool calls, tool results with ~600 characters of output, messages."""
    out = []
    for i in range(n):
        if i % 3 == 0:
            kind, data = "tool_call", {"type": "tool_call", "tool": "bash",
                                       "args": {"command": f"pytest tests/test_{i % 50}.py -x"},
                                       "call_id": f"c{i}"}
        elif i % 3 == 1:
            kind, data = "tool_result", {"type": "tool_result", "tool": "bash", "call_id": f"c{i - 1}",
                                         "output": "collected 12 items\n" + "." * 580, "exit_code": 0}
        else:
            kind, data = "assistant_message", {"type": "assistant_message",
                                               "text": "The test passes now; moving on to the parser."}
        out.append({"session_id": f"s{i % 4}", "seq": i + 1, "ts": 1_700_000_000.0 + i,
                    "kind": kind, "data": data})
    return out


def run(cls: type[Store], events: list[dict[str, Any]], batch: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = cls.open(Path(tmp) / "bench.db")
        try:
            start, cpu = time.perf_counter(), time.process_time()
            for i in range(0, len(events), batch):
                store.write(Batch(events=events[i:i + batch]))
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            assert store.count("events") == len(events)
        finally:
            store.close()
    return len(events) / elapsed, len(events) / cpu


def run_raw(mode: str, events: list[dict[str, Any]], batch: int) -> tuple[float, float]:
    """Only the insert step: rows already prepared by the store, inserted one way or the other."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "bench.db")
        try:
            prepare = store.values.prepare if hasattr(store, "values") else store._prepare  # (older checkouts)
            rows = [prepare("events", e) for e in events]
            start, cpu = time.perf_counter(), time.process_time()
            for i in range(0, len(rows), batch):
                chunk = rows[i:i + batch]
                with transaction(store.db.conn):
                    if mode == "insert_all":
                        store.db["events"].insert_all(chunk, batch_size=len(chunk))
                    else:
                        Store._append(store, "events", chunk)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            assert store.count("events") == len(events)
        finally:
            store.close()
    return len(events) / elapsed, len(events) / cpu


def report(title: str, results: dict[str, list[tuple[float, float]]]) -> None:
    """Wall-clock events/s (best and median) and events per CPU second (median)."""
    print(title)
    summary = {}
    for name, rounds in results.items():
        wall, cpu = [r[0] for r in rounds], [r[1] for r in rounds]
        summary[name] = max(wall), statistics.median(cpu)
        print(f"  {name:<12} wall best {max(wall):>9,.0f} /s, median {statistics.median(wall):>9,.0f} /s;"
              f"  per CPU second {statistics.median(cpu):>9,.0f}")
    best, cpu = (summary["executemany"][i] / summary["insert_all"][i] for i in (0, 1))
    print(f"  executemany / insert_all: {best:.2f} (wall, best), {cpu:.2f} (CPU, median)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    events = make_events(args.events)
    whole: dict[str, list[tuple[float, float]]] = {"insert_all": [], "executemany": []}
    raw: dict[str, list[tuple[float, float]]] = {"insert_all": [], "executemany": []}
    for _ in range(args.rounds):  # alternate, so drift in the machine hits both alike
        whole["insert_all"].append(run(InsertAllStore, events, args.batch))
        whole["executemany"].append(run(Store, events, args.batch))
        for mode in raw:
            raw[mode].append(run_raw(mode, events, args.batch))
    print(f"sqlite-utils {importlib.metadata.version('sqlite-utils')}, SQLite {sqlite3.sqlite_version}, "
          f"{args.events:,} events in batches of {args.batch:,}, {args.rounds} rounds")
    report("Store.write (checks, JSON encoding, capping, insert):", whole)
    report("insert step only (rows already prepared):", raw)


if __name__ == "__main__":
    main()
