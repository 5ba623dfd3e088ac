"""The guardian: a tiny process that kills the daemon's agents if the daemon dies.

The daemon starts it in its own session and tells it, one line each on its stdin,
what it must protect the world from (`+`) and what has ended (`-`):

    +g PGID START   a process group the daemon launched, and its leader's start time
    +c PATH         a cgroup v2 directory holding only the daemon's agents
    +p PID START    one process that left its group (pid and start time, clock ticks after boot)
    +m SUFFIX       the end of the LOOPWARDEN_SESSION mark every agent of this daemon carries
    -g PGID START / -c PATH / -p PID START / -m SUFFIX    forget it

When the daemon's end of the pipe closes, for any reason including SIGKILL, the guardian
sends SIGTERM to all of it (the marked processes found by one pass over /proc), waits up
to the grace period for them to go, sends SIGKILL until nothing is left, removes the
cgroups, and exits. So no agent, nor anything it started, outlives its daemon. If the
guardian dies instead, the daemon notices, starts a new one and tells it everything again.
"""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from .cgroups import SessionCgroup
from .procfs import ProcId, ProcTable, signal_exact, signal_group

KILL_WAIT = 2.0  # after the first SIGKILL, keep killing newcomers this long
POLL_SECONDS = 0.05


@dataclass
class Protected:
    """What the daemon told the guardian to kill if it dies."""

    groups: set[ProcId] = field(default_factory=set)  # the group id and its leader's start time
    cgroups: set[str] = field(default_factory=set)
    procs: set[ProcId] = field(default_factory=set)
    marks: set[str] = field(default_factory=set)

    def apply(self, line: str) -> None:
        """One protocol line; anything malformed is ignored."""
        sign, kind, value = line[:1], line[1:2], line[2:].strip()
        if sign not in "+-" or len(line) < 4 or line[2:3] != " " or not value:
            return
        add = sign == "+"
        if kind in "gp":
            pid, _, start = value.partition(" ")
            if pid.isdigit() and start.isdigit():
                _toggle(self.groups if kind == "g" else self.procs, ProcId(int(pid), int(start)), add)
        elif kind == "c":
            _toggle(self.cgroups, value, add)
        elif kind == "m":
            _toggle(self.marks, value, add)

    def __bool__(self) -> bool:
        return bool(self.groups or self.cgroups or self.procs or self.marks)


T = TypeVar("T")


def _toggle(items: set[T], item: T, add: bool) -> None:
    if add:
        items.add(item)
    else:
        items.discard(item)


def remaining(what: Protected, *, marks: bool) -> tuple[set[ProcId], set[int]]:
    """The live processes of `what` now, and the protected process groups that still have a live member
    born after their leader (else the id was reused). With `marks`, every process's environment is read
    for the marks too (one pass; those found are protected from then on)."""
    table = ProcTable.scan()
    if marks and what.marks:
        for info in table.procs.values():
            mark = table.mark(info.pid) if not info.zombie else None
            if mark and any(mark.endswith(suffix) for suffix in what.marks):
                what.procs.add(info.id)
    found = {p for p in what.procs if table.is_current(p)}
    for cgroup in what.cgroups:
        found |= {table.procs[pid].id for pid in SessionCgroup(Path(cgroup)).pids() if table.live(pid)}
    born = {g.pid: g.start for g in what.groups}
    groups = {info.pgid for info in table.procs.values()
              if not info.zombie and info.pgid in born and info.start >= born[info.pgid]}
    return found, groups


def stop_everything(what: Protected, grace: float) -> None:
    """SIGTERM, up to `grace` seconds, then SIGKILL until nothing protected is left."""
    procs, groups = remaining(what, marks=True)
    if not procs and not groups:
        _remove_cgroups(what)
        return
    for pgid in groups:
        signal_group(pgid, signal.SIGCONT)
        signal_group(pgid, signal.SIGTERM)
    warned: set[ProcId] = set()
    deadline = time.monotonic() + grace
    while (procs or groups) and time.monotonic() < deadline:
        for proc in procs - warned:
            signal_exact(proc, signal.SIGCONT)
            signal_exact(proc, signal.SIGTERM)
        warned |= procs
        time.sleep(POLL_SECONDS)
        procs, groups = remaining(what, marks=False)
    procs, groups = remaining(what, marks=True)  # anything marked that started during the grace
    deadline = time.monotonic() + KILL_WAIT
    while procs or groups:
        for cgroup in what.cgroups:
            SessionCgroup(Path(cgroup)).kill()
        for pgid in groups:
            signal_group(pgid, signal.SIGKILL)
        for proc in procs:
            signal_exact(proc, signal.SIGKILL)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.01)
        procs, groups = remaining(what, marks=False)
    _remove_cgroups(what)


def _remove_cgroups(what: Protected) -> None:
    for cgroup in what.cgroups:
        SessionCgroup(Path(cgroup)).remove()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    grace = float(args[0]) if args else 5.0
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    what = Protected()
    for raw in sys.stdin.buffer:
        what.apply(raw.decode("utf-8", "replace").rstrip("\n"))
    if what:
        stop_everything(what, grace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
