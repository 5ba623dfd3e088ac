"""Kept agents: a daemon restarted with 200 sessions, and what keeping costs in memory.

    .venv/bin/python bench/kept.py [--sessions 200] [--repeats 1]

A daemon whose agents the keeper holds (daemon.keep_agents, in a temporary LOOPWARDEN_HOME) starts N native
sessions of tests/agents/paced_flood.py at 2 events/s each (a quiet agent that still writes), and waits until
every one runs. Then:

(a) memory: the keeper's unique memory (USS) with N agents, less its USS before any: the memory each kept
    session adds. The daemon's own memory is the same with or without a keeper (its sessions are the same).
(b) restart: `loopwarden restart-daemon --yes` as a user runs it; timed from the command's start until the new
    daemon lists every session running again (taken up: its streams attached to the keeper). Target: under 2 s
    for 200 sessions. Also printed: the command's own time, when every session's event count has moved past what
    the old daemon stored (events the new one read itself; snapshots are published at most once a second), and
    what the new daemon says it read again (`status`: nothing lost).

Every session is killed at the end; nothing is left running.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.live_common import BenchDaemon, verdict_line
from tests.support.paths import PY
from tests.support.waiting import wait_for

AGENT = str(Path(__file__).resolve().parent.parent / "tests" / "agents" / "paced_flood.py")


def live(d: BenchDaemon, sids: set[str]) -> dict[str, dict[str, object]]:
    return {s["id"]: s for s in d.request("list") if s["id"] in sids and s["state"] == "running"}


def one_round(n: int) -> tuple[float, float, float, dict[str, object]]:
    with BenchDaemon("kept", kept=True) as d:
        keeper = psutil.Process(d.request("ping")["keeper"]["pid"])
        before = keeper.memory_full_info().uss
        sids = {d.run([PY, AGENT, "--rate", "2", "--tick", "0.5"], name=f"k{i}") for i in range(n)}
        wait_for(lambda: len(live(d, sids)) == n, 300, f"{n} sessions running", 0.5)
        time.sleep(2.0)  # (their interpreters settle: the memory read next is the steady one)
        per_session = (keeper.memory_full_info().uss - before) / n
        counts = {sid: int(s["events"]) for sid, s in live(d, sids).items()}  # type: ignore[call-overload]
        old = d.pid
        started = time.monotonic()
        done = subprocess.run([PY, "-m", "loopwarden", "restart-daemon", "--yes"], env=d.env, capture_output=True,
                              text=True, timeout=120, check=False)
        command = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"restart-daemon failed: {done.stderr}")
        d._client = None  # the old daemon's connection is gone

        def back(moved: bool) -> bool:
            try:
                ping = d.request("ping")
                snaps = {s["id"]: s for s in d.request("list") if s["id"] in sids}
            except Exception:  # noqa: BLE001 - the new daemon is not answering yet
                d._client = None
                return False
            return ping["pid"] != old and len(snaps) == n and all(
                s["state"] == "running" and (not moved or int(s["events"]) > counts[sid])  # type: ignore[call-overload]
                for sid, s in snaps.items())

        wait_for(lambda: back(False), 120, "every session taken up", 0.01)
        elapsed = time.monotonic() - started
        wait_for(lambda: back(True), 120, "every session's events stored by the new daemon", 0.05)
        flowing = time.monotonic() - started
        ping = d.request("ping")
        if ping["pid"] == old:
            raise RuntimeError("the daemon was not replaced")
        proc = psutil.Process(ping["pid"])
        d.proc = None  # the new daemon is not this object's child: it is stopped through the socket
        d.request("shutdown")
        wait_for(lambda: not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, 60, "the daemon to stop")
        return per_session, elapsed, command, flowing, ping["keeper"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    print(f"kept agents: {args.sessions} sessions, {args.repeats} repeats; load {os.getloadavg()[0]:.1f}, "
          f"{os.cpu_count()} cores", flush=True)
    times = []
    for i in range(args.repeats):
        per, elapsed, command, flowing, keeper = one_round(args.sessions)
        times.append(elapsed)
        print(f"  run {i + 1}: keeper memory {per / 1024:.1f} KiB per kept session; restart-daemon: every session "
              f"taken up by the new daemon {elapsed:.2f} s after the command started (the command itself "
              f"{command:.2f} s; every session's new events stored {flowing:.2f} s after it); load "
              f"{os.getloadavg()[0]:.1f}; the new daemon: {keeper}", flush=True)
    print(verdict_line(max(times) < 2.0, f"{args.sessions} sessions back under supervision in "
                                          f"{max(times):.2f} s at worst (target < 2 s)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
