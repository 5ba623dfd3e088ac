"""Idle cost: the daemon's CPU with no live session, and with 200 sessions whose agents print nothing.

    .venv/bin/python bench/idle.py [--sessions 200] [--window 30] [--settle 32] [--keep]
                                   [--subscribers K] [--before DIR]

A daemon (`loopwarden serve` in a temporary LOOPWARDEN_HOME) is measured over
WINDOW seconds of CPU time (psutil cpu_times user + system, all threads), as % of
one core, three times:
  1. empty: no session has ever run (after 2 s of start-up);
  2. busy idle: N plain-adapter sessions of `python3 -c "import time;
     time.sleep(600)"` (they print nothing), all running, --settle s after they all
     run: past the one stall nudge each gets at limits.stall_timeout (30 s), so
     the window shows the steady state, not that one-off burst of verdicts;
  3. empty again: after every session was killed and is final (5 s later).
Baseline, over the same windows in the same run: a bare asyncio loop sleeping in
another interpreter (`python3 -c "import asyncio; asyncio.run(asyncio.sleep(1e6))"`),
whose CPU is the machine's measuring noise for a process that does nothing.

With --subscribers K, K consoles watch throughout: each a `subscribe` (as the console's) on the real
client, read in a thread of this process, from before the first window to the end; a quiet
subscription gets the daemon's heartbeat (every 5 s, one timer for all). With --before DIR the
whole measurement is repeated by a daemon importing the loopwarden of DIR (e.g. `git archive main
| tar -x -C DIR`), the two printed one above the other.

CPU time is counted in clock ticks (10 ms): over 30 s one tick is 0.033 %.
Targets: no live session under 0.1 % of a core; 200 idle sessions under 1 %.
The load average is printed beside each figure. Always exits 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import BenchDaemon, engine_of, leftovers, verdict_line
from kill_many import cpu, start_sessions, wait_all_final

from loopwarden.runtime.client import Client

EMPTY_TARGET = 0.1  # % of one core
BUSY_TARGET = 1.0
BASELINE_CMD = [sys.executable, "-c", "import asyncio; asyncio.run(asyncio.sleep(1e6))"]


def window(procs: list[psutil.Process], seconds: float) -> list[float]:
    """% of one core each process used over the same `seconds`."""
    before, w0 = [cpu(p) for p in procs], time.monotonic()
    time.sleep(seconds)
    after, w1 = [cpu(p) for p in procs], time.monotonic()
    return [100 * (a - b) / (w1 - w0) for a, b in zip(after, before, strict=True)]


def watch(d: BenchDaemon, k: int) -> list[Any]:
    """K subscriptions on the real client, each read (and dropped) by a thread until its client closes."""
    clients = [Client.connect(d.paths, autostart=False, name="bench-console") for _ in range(k)]

    def read(client: Any) -> None:
        try:
            _first, updates = client.subscribe()
            for _ in updates:
                pass
        except Exception:  # noqa: BLE001 - closed at the end of the run, however the read ends
            pass

    for client in clients:
        threading.Thread(target=read, args=(client,), daemon=True).start()
    return clients


def measure(args: argparse.Namespace, base: subprocess.Popen[bytes], before: Path | None) -> tuple[list[Any], str]:
    """The three windows against one daemon (this checkout's, or `before`'s): rows, and leftover processes."""
    n = args.sessions
    rows: list[tuple[str, float, float, float]] = []
    with BenchDaemon("idle", keep=args.keep, checkout=before) as d:
        assert d.ps is not None
        procs = [d.ps, psutil.Process(base.pid)]
        watchers = watch(d, args.subscribers)
        try:
            time.sleep(2.0)
            daemon, bare = window(procs, args.window)
            rows.append(("no session yet", daemon, bare, os.getloadavg()[0]))
            sids = start_sessions(d, n)
            time.sleep(args.settle)
            daemon, bare = window(procs, args.window)
            rows.append((f"{n} idle sessions", daemon, bare, os.getloadavg()[0]))
            for sid in sids:
                d.request("kill", session=sid, note="benchmark")
            wait_all_final(d, sids)
            time.sleep(5.0)
            daemon, bare = window(procs, args.window)
            rows.append(("no session (all ended)", daemon, bare, os.getloadavg()[0]))
        finally:
            for client in watchers:
                client.close()
            d.close()
        left = leftovers(d)
    return rows, left


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=32.0, help="seconds after all sessions run, before measuring")
    ap.add_argument("--keep", action="store_true", help="keep the temporary LOOPWARDEN_HOME")
    ap.add_argument("--subscribers", type=int, default=0, help="consoles subscribed throughout (default 0)")
    ap.add_argument("--before", metavar="DIR", help="also measure the loopwarden of this checkout, first")
    args = ap.parse_args()
    before = Path(args.before).resolve() if args.before else None
    print(f"daemon: {engine_of()}" + (f"; before: {engine_of(before)}" if before else "")
          + f"; {args.subscribers} subscriber(s)", flush=True)
    base = subprocess.Popen(BASELINE_CMD, stdin=subprocess.DEVNULL)
    runs: list[tuple[str, list[Any], str]] = []
    try:
        if before is not None:
            runs.append(("before", *measure(args, base, before)))
        runs.append(("after" if before is not None else "", *measure(args, base, None)))
    finally:
        base.kill()
        base.wait()
    lines = []
    for label, rows, left in runs:
        for what, daemon, bare, load in rows:
            print(f"{label:7s}{what:24s} daemon {daemon:6.3f} % of a core   baseline (sleeping asyncio) {bare:6.3f} %"
                  f"   window {args.window:.0f} s   load {load:.2f}")
        for what, daemon, bare, _ in rows:
            target = BUSY_TARGET if "idle sessions" in what else EMPTY_TARGET
            lines.append(verdict_line(daemon < target, f"{label} {what}: {daemon:.3f} % < {target} % "
                                                       f"(baseline {bare:.3f} %)".lstrip()))
        lines.append(verdict_line(not left, f"{label} no leftover processes".lstrip() + (f": {left}" if left else "")))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
