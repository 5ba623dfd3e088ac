"""A live session's end, in-process, and the final snapshot: counted so that the machine's load cannot move it.

    .venv/bin/python bench/session_end.py [-n 100]                    # this thread's CPU (noisy on a shared machine)
    valgrind --tool=callgrind --instr-atstart=no --trace-children=no --callgrind-out-file=/tmp/se.%p \
        .venv/bin/python bench/session_end.py -n 100 --callgrind       # instructions: `summary:` of /tmp/se.PID.1
    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python bench/session_end.py --snapshots N
                                                                       # "Collected": N=1000 minus N=0, per snapshot

(a) Sessions: N plain-adapter live sessions of `sleep 600`, run as the daemon runs them (a child subreaper, the
    pidfd child watcher, one containment Sweep for all, walked from their seeds), with a sink that keeps
    nothing (no store, no snapshots, no requests). Once all run and wait, each is killed as `op_kill` does
    (`kill_soon`: its ticker carries it out), one per pass of the event loop, until every one is final. With
    --callgrind the script switches callgrind's instrumentation on just before the first kill and dumps once
    all are final: the dump holds the instructions of the sessions' ends (tasks, pumps, containment, reaping)
    and nothing of the start-up.
(b) --snapshots N: N builds of a killed plain session's final snapshot (each after a publish, so none comes
    from the cache), nothing else; run it for N and for 0 under callgrind and subtract (the start-up cancels).

For another checkout's code: run from /tmp with PYTHONPATH=/path/to/checkout (`python FILE` puts the script's
folder first on sys.path, never the checkout). Informative (no target of its own); always exits 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from typing import Any

import anyio
import anyio.lowlevel

from loopwarden.runtime.containment import Sweep
from loopwarden.runtime.processes import wait_children_by_pidfd
from loopwarden.runtime.reaper import become_subreaper
from loopwarden.runtime.session import LiveSession, SessionSpec
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.verdicts import SessionState


def _ignore(*args: Any, **kwargs: Any) -> None:
    """A sink that keeps nothing."""


def idle(session: LiveSession) -> bool:
    """The session's ticker and stdin writer wait for nothing but a wake-up (older checkouts: its flags)."""
    if hasattr(session, "ticker"):
        return session.ticker.idle and session.writer.idle
    return bool(session._ticker_idle and session._writer_idle)


def publish(session: LiveSession) -> None:
    """Tell the daemon the session changed (older checkouts: the session's own method)."""
    if hasattr(session, "journal"):
        session.journal.publish()
    else:
        session._publish()


def _session(i: int, command: list[str]) -> LiveSession:
    spec = SessionSpec(id=f"s{i}", name=f"quiet{i}", command=command, adapter="plain",
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    return LiveSession(spec, load_config(env={}), adapters()["plain"](), sink=_ignore)


async def _callgrind(*args: str) -> None:
    """callgrind_control on this process; valgrind answers only while this process runs code, so poll."""
    control = subprocess.Popen(  # noqa: ASYNC220 - it must not block: we keep running code until it answers
        ["callgrind_control", *args, str(os.getpid())], stdout=subprocess.DEVNULL)
    while control.poll() is None:  # noqa: ASYNC110 - valgrind answers only while this process runs code
        await anyio.sleep(0.01)


async def end_sessions(n: int, callgrind: bool) -> None:
    wait_children_by_pidfd()
    if not become_subreaper():
        print("not a child subreaper here (Linux only); nothing measured")
        return
    sweep = Sweep(os.getpid())
    sessions = [_session(i, ["sleep", "600"]) for i in range(n)]
    async with anyio.create_task_group() as tg:
        for session in sessions:
            session.containment.walk = True
            session.containment.sweep = sweep
            tg.start_soon(session.run)
        deadline = time.monotonic() + 60
        while not all(s.state == SessionState.RUNNING and idle(s) for s in sessions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} sessions did not all start")
            await anyio.sleep(0.05)
        await anyio.sleep(1.0)  # every agent has exec'd its sleep
        if callgrind:
            await _callgrind("-i", "on")
        cpu = time.thread_time()
        for session in sessions:
            if not session.kill_soon("benchmark"):
                tg.start_soon(session.kill, "benchmark")
            await anyio.lowlevel.checkpoint()
        while not all(s.final for s in sessions):  # noqa: ASYNC110 - a session has no event for its end
            await anyio.sleep(0.01)
        cpu = time.thread_time() - cpu
        if callgrind:
            await _callgrind("-d")
    print(f"{n} sessions ended: this thread's CPU {1e3 * cpu:.1f} ms ({1e6 * cpu / n:.0f} us each); containment "
          f"looks {sweep.looks} for {sweep.asked} asked; load {os.getloadavg()[0]:.2f}")


def snapshots(n: int) -> None:
    session = _session(0, ["true"])
    session.state, session.pid = SessionState.TERMINATED, 4321
    session.started_at, session.ended_at = 100.0, 105.0
    session.health.kill_terminate(105.0, "benchmark")
    session.snapshot()
    for _ in range(n):
        publish(session)  # what a change does: the next snapshot is built, not taken from the cache
        session.snapshot()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=100, help="sessions to end")
    ap.add_argument("--callgrind", action="store_true", help="switch callgrind's instrumentation on around the ends")
    ap.add_argument("--snapshots", type=int, metavar="N", help="only build N final snapshots")
    args = ap.parse_args()
    if args.snapshots is not None:
        snapshots(args.snapshots)
        return 0
    anyio.run(end_sessions, args.n, args.callgrind)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
