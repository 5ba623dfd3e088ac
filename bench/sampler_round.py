"""The daemon's sampler round at N live sessions, in-process: what it costs, and how long it holds the event loop.

    .venv/bin/python bench/sampler_round.py [-n 200] [--rounds 10]          # CPU and the loop's longest hold
    valgrind --tool=callgrind --instr-atstart=no --trace-children=no --callgrind-out-file=/tmp/sr.%p \\
        .venv/bin/python bench/sampler_round.py -n 200 --rounds 5 --callgrind  # `summary:` of /tmp/sr.PID.1

N plain-adapter live sessions of `sleep 600` run in-process as the daemon runs them (a child subreaper, the pidfd
child watcher, one containment Sweep, a cgroup per session when cgroup v2 is writable here, as the daemon's), with
a sink that keeps nothing. Once all run, `processes.sample_round` (the daemon sampler's round: a pass over /proc in
a worker thread, then each session's observe and sample) runs `--rounds` times alone (its CPU, all threads: the
pass over /proc runs in a worker thread), each followed by a round watched by a task that sleeps 1 ms at a time:
how late its wake-ups came is the longest time the event loop ran nothing else. With --callgrind the
instrumentation is on around the rounds alone (no watched rounds): their instructions, all threads.

For another checkout's code: run from /tmp with PYTHONPATH=/path/to/checkout. Informative; always exits 0.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time
from typing import Any

import anyio

from loopwarden.runtime import processes
from loopwarden.runtime.cgroups import CgroupTree
from loopwarden.runtime.containment import Containment, Sweep
from loopwarden.runtime.processes import wait_children_by_pidfd
from loopwarden.runtime.procfs import ProcTable
from loopwarden.runtime.reaper import become_subreaper
from loopwarden.runtime.session import LiveSession, SessionSpec
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.verdicts import SessionState


def _ignore(*args: Any, **kwargs: Any) -> None:
    """A sink that keeps nothing."""


def ticker_idle(session: LiveSession) -> bool:
    """The session's ticker waits for nothing but its wake-up (older checkouts: the session's flag)."""
    return session.ticker.idle if hasattr(session, "ticker") else bool(session._ticker_idle)


def _session(i: int, tree: CgroupTree | None, sweep: Sweep) -> LiveSession:
    sid = f"s{i}"
    spec = SessionSpec(id=sid, name=f"quiet{i}", command=["sleep", "600"], adapter="plain",
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    containment = Containment(sid, mark=f"{sid}@bench", cgroup=tree.session(sid) if tree is not None else None)
    containment.walk = True
    containment.sweep = sweep
    return LiveSession(spec, load_config(env={}), adapters()["plain"](), sink=_ignore, containment=containment)


async def _callgrind(*args: str) -> None:
    """callgrind_control on this process; valgrind answers only while this process runs code, so poll."""
    control = subprocess.Popen(  # noqa: ASYNC220 - it must not block: we keep running code until it answers
        ["callgrind_control", *args, str(os.getpid())], stdout=subprocess.DEVNULL)
    while control.poll() is None:  # noqa: ASYNC110 - valgrind answers only while this process runs code
        await anyio.sleep(0.01)


async def _round_inline(sessions: list[Any]) -> None:
    """The round as main had it inline in `ProcessWatch._sampler` before `sample_round` (a checkout without it)."""
    live = [s for s in sessions if not (s.final or s.stopping)]
    if not live:
        return
    table = await anyio.to_thread.run_sync(ProcTable.scan)
    for session in live:
        if not (session.final or session.stopping):
            session.observe(table)
            await session.sample(table.children)


sample_round = getattr(processes, "sample_round", _round_inline)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Holds:
    """The longest time the event loop went without running other tasks: a task that sleeps 1 ms at a time notes
    how late each wake-up came (a spinning task would compete with the round's worker thread for the GIL)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.running = True

    async def watch(self) -> None:
        while self.running:
            t0 = time.perf_counter()
            await anyio.sleep(0.001)
            self.longest = max(self.longest, time.perf_counter() - t0 - 0.001)


async def measure(n: int, rounds: int, callgrind: bool) -> None:
    wait_children_by_pidfd()
    if not become_subreaper():
        print("not a child subreaper here (Linux only); nothing measured")
        return
    tree, how = CgroupTree.create()
    sweep = Sweep(os.getpid())
    sessions = [_session(i, tree, sweep) for i in range(n)]
    try:
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(session.run)
            deadline = time.monotonic() + 60
            while not all(s.state == SessionState.RUNNING and ticker_idle(s) for s in sessions):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{n} sessions did not all start")
                await anyio.sleep(0.05)
            await anyio.sleep(1.0)  # every agent has exec'd its sleep
            await sample_round(sessions)  # the first round fills the sessions' tick counts
            if callgrind:
                await _callgrind("-i", "on")
            cpus, holds = [], []
            for _ in range(rounds):  # CPU (or instructions) of a round alone, then a round with the loop watched
                c0 = _cpu()
                await sample_round(sessions)
                cpus.append(_cpu() - c0)
                await anyio.sleep(0.3)  # the next round's CPU figures have moved, as between the daemon's rounds
                if callgrind:
                    continue
                hold = _Holds()
                tg.start_soon(hold.watch)
                await anyio.sleep(0.05)
                await sample_round(sessions)
                await anyio.sleep(0.05)
                hold.running = False
                holds.append(hold.longest)
                await anyio.sleep(0.3)
            if callgrind:
                await _callgrind("-d")
            for session in sessions:
                if not session.kill_soon("benchmark"):
                    tg.start_soon(session.kill, "benchmark")
    finally:
        if tree is not None:
            tree.root.remove()
    cpus.sort()
    holds.sort()
    held = (f"the loop's longest hold median {1e3 * holds[len(holds) // 2]:.1f} ms (max {1e3 * holds[-1]:.1f})"
            if holds else "the loop's holds not measured under callgrind")
    print(f"{n} sessions ({'cgroups: ' + how if tree is not None else 'no cgroups: ' + how}), {rounds} rounds: "
          f"CPU per round (all threads) median {1e3 * cpus[len(cpus) // 2]:.1f} ms (min {1e3 * cpus[0]:.1f}), {held}; "
          f"load {os.getloadavg()[0]:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200, help="live sessions")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--callgrind", action="store_true", help="switch callgrind's instrumentation on around the rounds")
    args = ap.parse_args()
    anyio.run(measure, args.n, args.rounds, args.callgrind)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
