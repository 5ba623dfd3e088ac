"""Rebuilding sessions' engines from the store: what a restarted daemon pays to take its sessions up again.

    .venv/bin/python bench/rebuild.py                      # 200 sessions x 2,000 events (the issue's case)
    .venv/bin/python bench/rebuild.py --sessions 20 --events 20000 --runs 3

Writes a store of N sessions of M events each (the flood agents' cycle: calls, results, messages, usage...,
stored as the daemon stores typed lines), then, best of --runs, interleaved:
  (a) read:    every session's rows paged out of the store and their JSON decoded, nothing judged
  (b) rebuild: `runtime.rebuild.rebuild(store, sid, config)` for every session
and prints events per CPU second of each, the ratio, and the rebuild's time for all N sessions against the
target (200 live sessions back under supervision in under 2 s, of which rebuilding is one part). Always exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loopwarden.runtime.rebuild import PAGE, rebuild  # noqa: E402
from loopwarden.runtime.store import Store  # noqa: E402
from loopwarden.supervisor.config import load_config  # noqa: E402
from tests.rebuild.helpers import store_flood  # noqa: E402

TARGET_SECONDS = 2.0


def read_only(store: Store, sids: list[str]) -> int:
    """Every session's events paged and decoded, as the rebuild reads them: the baseline."""
    n = 0
    for sid in sids:
        after = 0
        while True:
            rows = store.events(sid, after, PAGE)
            n += len(rows)
            if len(rows) < PAGE:
                break
            after = rows[-1]["id"]
    return n


def rebuild_all(store: Store, sids: list[str]) -> int:
    config = load_config(env={})
    return sum(rebuild(store, sid, config).events for sid in sids)


def timed(fn, store: Store, sids: list[str]) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    cpu, wall = time.process_time(), time.perf_counter()
    n = fn(store, sids)
    return time.process_time() - cpu, time.perf_counter() - wall, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--events", type=int, default=2000, help="events per session")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "store.db") as store:
        made = time.perf_counter()
        sids = [f"s{i + 1}" for i in range(args.sessions)]
        for sid in sids:
            store_flood(store, sid, args.events)
        print(f"store: {args.sessions} sessions x {args.events:,} events written in "
              f"{time.perf_counter() - made:.1f} s; load average {os.getloadavg()[0]:.2f}")
        best_read = best_cpu = best_wall = float("inf")
        total = args.sessions * args.events
        for _ in range(args.runs):
            read_cpu, _, n_read = timed(read_only, store, sids)
            cpu, wall, n = timed(rebuild_all, store, sids)
            assert n == n_read == total, (n, n_read, total)
            best_read, best_cpu, best_wall = min(best_read, read_cpu), min(best_cpu, cpu), min(best_wall, wall)
    print(f"(a) read:    {total / best_read:,.0f} events/s ({best_read:.2f} s CPU)")
    print(f"(b) rebuild: {total / best_cpu:,.0f} events/s ({best_cpu:.2f} s CPU, {best_wall:.2f} s wall); "
          f"rebuild / read {best_cpu / best_read:.2f}x")
    per_session = best_cpu / args.sessions
    print(f"{args.sessions} sessions x {args.events:,} events: {best_cpu:.2f} s CPU "
          f"({per_session * 1000:.1f} ms a session); target < {TARGET_SECONDS} s for 200 sessions: "
          f"{'PASS' if per_session * 200 < TARGET_SECONDS else 'FAIL'} "
          f"(200 sessions at this size: {per_session * 200:.2f} s); load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
