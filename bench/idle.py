"""Idle cost: the daemon's CPU with no live session, and with 200 sessions whose agents print nothing.

    .venv/bin/python bench/idle.py [--sessions 200] [--window 30] [--settle 32] [--keep]

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

CPU time is counted in clock ticks (10 ms): over 30 s one tick is 0.033 %.
Targets (issue 16): no live session under 0.1 % of a core; 200 idle sessions under 1 %.
The load average is printed beside each figure. Always exits 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import BenchDaemon, engine_of, leftovers, verdict_line
from kill_many import cpu, start_sessions, wait_all_final

EMPTY_TARGET = 0.1  # % of one core
BUSY_TARGET = 1.0
BASELINE_CMD = [sys.executable, "-c", "import asyncio; asyncio.run(asyncio.sleep(1e6))"]


def window(procs: list[psutil.Process], seconds: float) -> list[float]:
    """% of one core each process used over the same `seconds`."""
    before, w0 = [cpu(p) for p in procs], time.monotonic()
    time.sleep(seconds)
    after, w1 = [cpu(p) for p in procs], time.monotonic()
    return [100 * (a - b) / (w1 - w0) for a, b in zip(after, before, strict=True)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=32.0, help="seconds after all sessions run, before measuring")
    ap.add_argument("--keep", action="store_true", help="keep the temporary LOOPWARDEN_HOME")
    args = ap.parse_args()
    n = args.sessions
    print(f"daemon: {engine_of()}", flush=True)
    base = subprocess.Popen(BASELINE_CMD, stdin=subprocess.DEVNULL)
    rows: list[tuple[str, float, float, float]] = []
    try:
        with BenchDaemon("idle", keep=args.keep) as d:
            assert d.ps is not None
            procs = [d.ps, psutil.Process(base.pid)]
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
                d.close()
            left = leftovers(d)
    finally:
        base.kill()
        base.wait()
    for label, daemon, bare, load in rows:
        print(f"{label:24s} daemon {daemon:6.3f} % of a core   baseline (sleeping asyncio) {bare:6.3f} %   "
              f"window {args.window:.0f} s   load {load:.2f}")
    lines = []
    for label, daemon, bare, _ in rows:
        target = BUSY_TARGET if "idle sessions" in label else EMPTY_TARGET
        lines.append(verdict_line(daemon < target, f"{label}: {daemon:.3f} % < {target} % (baseline {bare:.3f} %)"))
    lines.append(verdict_line(not left, "no leftover processes" + (f": {left}" if left else "")))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
