"""An agent whose children try to outlive it: one calls setsid(), one is double-forked away.

    python tests/agents/escaper.py [--exit]

Starts a child that calls setsid() (a new session and process group, still in the tree)
and a grandchild that calls setsid() after its parent exits at once (a double fork: it
leaves the tree too, as a daemon does). Both close their standard streams, ignore
SIGTERM and SIGHUP, and sleep 10 minutes at most, so a leak goes away on its own.
The agent prints `setsid PID` and `double PID` (one line each), then sleeps too, or,
with --exit, exits 0 at once.
"""

from __future__ import annotations

import os
import signal
import sys
import time

LIFETIME = 600.0


def linger() -> None:
    """Become a process nothing but SIGKILL ends, with no tie to the agent's pipes."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    end = time.monotonic() + LIFETIME
    while time.monotonic() < end:
        time.sleep(min(60.0, max(0.0, end - time.monotonic())))
    os._exit(0)


def setsid_child() -> int:
    pid = os.fork()
    if pid == 0:
        os.setsid()
        linger()
    return pid


def double_forked() -> int:
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        grandchild = os.fork()
        if grandchild == 0:
            os.close(write)
            os.setsid()
            linger()
        os.write(write, str(grandchild).encode())
        os._exit(0)  # the grandchild is an orphan now: it leaves the agent's tree
    os.close(write)
    with os.fdopen(read) as f:
        pid = int(f.read())
    os.wait()
    return pid


def main() -> int:
    print(f"setsid {setsid_child()}", flush=True)
    print(f"double {double_forked()}", flush=True)
    if "--exit" in sys.argv[1:]:
        return 0
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(LIFETIME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
