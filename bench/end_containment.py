"""The containment part of ending sessions, in-process: the CPU this thread spends ending N sessions'
processes (each a `sleep 600` agent in its own group; the process is a child subreaper, as the daemon is),
one end after another (as one `kill` request each) and all at once (as stop-daemon).

    .venv/bin/python bench/end_containment.py [-n 200] [--mode seq|all]
    PYTHONPATH=/path/to/another/checkout .venv/bin/python bench/end_containment.py   # that checkout's

Informative (no target of its own): what `kill_many.py`'s daemon CPU holds of containment, without the
requests, records and store. Always exits 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

import anyio

from loopwarden.runtime import containment
from loopwarden.runtime.reaper import become_subreaper


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--mode", choices=("seq", "all"), default="seq")
    args = ap.parse_args()
    if not become_subreaper():
        print("not a child subreaper here (Linux only); nothing measured")
        return 0
    procs, sessions = [], []
    for i in range(args.n):
        c = containment.Containment(f"t{i}", mark=f"t{i}@bench", daemon_pid=os.getpid())
        c.walk = True
        procs.append(subprocess.Popen(["sleep", "600"], env=c.environment(dict(os.environ)), start_new_session=True))
        c.started(procs[-1].pid)
        sessions.append(c)
    time.sleep(1)

    async def end_all() -> float:
        t0 = time.thread_time()
        if args.mode == "seq":
            for c in sessions:
                await c.end(grace=5.0)
        else:
            async with anyio.create_task_group() as tg:
                for c in sessions:
                    tg.start_soon(c.end, 5.0)
        return time.thread_time() - t0

    try:
        spent = anyio.run(end_all)
    finally:
        for c in sessions:
            c.release()
        for p in procs:
            p.kill()
            p.wait()
    print(f"{args.mode} {args.n} sessions: containment CPU {1e3 * spent:.1f} ms, {1e6 * spent / args.n:.0f} us "
          f"per session, load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
