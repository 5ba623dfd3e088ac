"""The guardian: a tiny process that kills the daemon's agents if the daemon dies.

The daemon starts it in its own session and tells it, one line each, which
process groups it launched (`+PGID`) and which ended (`-PGID`). When the
daemon's end of the pipe closes, for any reason including SIGKILL, the guardian
sends SIGTERM to every group it still knows, waits the grace period, sends
SIGKILL, and exits. So no agent outlives its daemon.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _kill_groups(groups: set[int], sig: int) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    grace = float(args[0]) if args else 5.0
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if len(line) < 2 or line[:1] not in (b"+", b"-") or not line[1:].isdigit():
            continue
        pgid = int(line[1:])
        if line[:1] == b"+":
            groups.add(pgid)
        else:
            groups.discard(pgid)
    if groups:
        _kill_groups(groups, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(g) for g in groups):
            time.sleep(0.05)
        _kill_groups(groups, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
