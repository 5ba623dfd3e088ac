"""The guardian: a tiny process that kills the daemon's agents if the daemon dies.

The daemon starts it in its own session and tells it, one line each on its stdin,
what it must protect the world from (`+`) and what has ended (`-`):

    +g PGID START SID INO   a process group the daemon launched, its leader's start time, its session
                            and the inode of the agent's stdout pipe (SID and INO may be left out)
    +c PATH                 a cgroup v2 directory holding only the daemon's agents (one directory a session)
    +p PID START SID        one process that left its group (pid and start time, clock ticks after boot)
    +m SUFFIX               the end of the LOOPWARDEN_SESSION mark (`SID@SUFFIX`) every agent carries
    -g ... / -c PATH / -p ... / -m SUFFIX    forget it (the same line, with `-`)

When the daemon's end of the pipe closes, for any reason including SIGKILL, the guardian
sends SIGTERM to all of it (the marked processes found by one pass over /proc), waits up
to the grace period for them to go, sends SIGKILL until nothing is left, removes the
cgroups, and exits. So no agent, nor anything it started, outlives its daemon. If the
guardian dies instead, the daemon notices, starts a new one and tells it everything again.

Given the profile's data directory and the daemon's `PID.START` (in its environment: REPORT_ENV), it
leaves a report of what it did there for the next daemon (guardian_report.py): when it saw the daemon
die, which processes of which session it found, when it sent SIGTERM and SIGKILL, what survived, and
the bytes each agent had written to its stdout that the daemon never read.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from . import guardian_report
from .cgroups import SessionCgroup
from .procfs import ProcId, ProcTable, proc_id, signal_exact, signal_group

KILL_WAIT = 2.0  # after the first SIGKILL, keep killing newcomers this long
POLL_SECONDS = 0.05


@dataclass
class Protected:
    """What the daemon told the guardian to kill if it dies."""

    groups: set[ProcId] = field(default_factory=set)  # the group id and its leader's start time
    cgroups: set[str] = field(default_factory=set)
    procs: set[ProcId] = field(default_factory=set)
    marks: set[str] = field(default_factory=set)
    owners: dict[ProcId, str] = field(default_factory=dict)  # a group's leader, or a process -> its session
    pipes: dict[str, int] = field(default_factory=dict)  # session -> the inode of its agent's stdout pipe

    def apply(self, line: str) -> None:
        """One protocol line; anything malformed is ignored."""
        sign, kind, value = line[:1], line[1:2], line[2:].strip()
        if sign not in "+-" or len(line) < 4 or line[2:3] != " " or not value:
            return
        add = sign == "+"
        if kind in "gp":
            pid, start, sid, inode = (value.split() + ["", "", ""])[:4]
            if pid.isdigit() and start.isdigit():
                proc = ProcId(int(pid), int(start))
                _toggle(self.groups if kind == "g" else self.procs, proc, add)
                if add and sid:
                    self.owners[proc] = sid
                    if kind == "g" and inode.isdigit():
                        self.pipes[sid] = int(inode)
                elif not add and kind == "g" and self.owners.get(proc):
                    self.pipes.pop(self.owners[proc], None)
                if not add:
                    self.owners.pop(proc, None)
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
                what.owners.setdefault(info.id, mark.rpartition("@")[0] or "?")
    found = {p for p in what.procs if table.is_current(p)}
    for cgroup in what.cgroups:
        found |= {table.procs[pid].id for pid in SessionCgroup(Path(cgroup)).pids() if table.live(pid)}
    born = {g.pid: g.start for g in what.groups}
    groups = {info.pgid for info in table.procs.values()
              if not info.zombie and info.pgid in born and info.start >= born[info.pgid]}
    return found, groups


def by_session(what: Protected) -> dict[str, list[int]]:
    """The live processes of each session now, by the session the daemon named for them (their group's,
    their own, their cgroup's, their mark's); "?" for those of none. Every session told of is listed."""
    table = ProcTable.scan()
    out: dict[str, list[int]] = {sid: [] for sid in what.owners.values()}
    leaders = {g.pid: g for g in what.groups}
    seen: set[int] = set()
    for info in table.procs.values():
        if info.zombie:
            continue
        leader = leaders.get(info.pgid)
        owner = what.owners.get(info.id) if info.id in what.procs else None
        if owner is None and leader is not None and info.start >= leader.start:
            owner = what.owners.get(leader, "?")
        if owner is not None:
            out.setdefault(owner, []).append(info.pid)
            seen.add(info.pid)
    for cgroup in what.cgroups:
        for sid, pids in _cgroup_sessions(Path(cgroup)):
            for pid in pids - seen:
                if table.live(pid):
                    out.setdefault(sid, []).append(pid)
    return out


def _cgroup_sessions(tree: Path) -> list[tuple[str, set[int]]]:
    try:
        return [(child.name, SessionCgroup(child).pids()) for child in tree.iterdir() if child.is_dir()]
    except OSError:
        return []


class Report:
    """What this guardian did, kept in the profile's data directory for the next daemon (guardian_report.py)."""

    def __init__(self, directory: str, instance: str) -> None:
        me = proc_id(os.getpid())
        self.directory, self.instance = directory, instance
        self.data: dict[str, Any] = {"version": 1, "daemon": instance, "state": "guarding",
                                     "guardian": {"pid": os.getpid(), "start": me.start if me else 0},
                                     "started_at": time.time(), "sessions": {}}
        self._write()

    def saw_death(self, what: Protected, died_at: float) -> None:
        """The daemon is gone: which processes of which session are alive, and what their stdout holds unread."""
        self.data.update(state="stopping", daemon_died_at=died_at)
        leaders = {sid: g.pid for g, sid in what.owners.items() if g in what.groups}
        for sid, pids in by_session(what).items():
            inode = what.pipes.get(sid)
            unread = None
            if inode is not None:
                for pid in sorted(pids, key=lambda p: p != leaders.get(sid)):  # the agent first
                    unread = guardian_report.unread_bytes(pid, inode)
                    if unread is not None:
                        break
            self.data["sessions"][sid] = {"processes": len(pids), "pids": sorted(pids)[:guardian_report.PIDS_LISTED],
                                          "unread_stdout": unread}
        self._write()

    def terminating(self) -> None:
        """SIGTERM goes out now."""
        self.data["term_at"] = time.time()

    def killing(self, what: Protected) -> None:
        """SIGKILL goes out now, to what is left of each session after the grace."""
        self.data["kill_at"] = time.time()
        for sid, pids in by_session(what).items():
            if pids and sid in self.data["sessions"]:
                self.data["sessions"][sid]["sigkill"] = len(pids)

    def done(self, what: Protected) -> None:
        left = by_session(what)
        for sid, entry in self.data["sessions"].items():
            entry["survivors"] = len(left.get(sid, []))
        self.data.update(state="done", done_at=time.time())
        if self.data["sessions"]:
            self._write(durable=True)
        else:  # a clean stop: nothing was left to stop, nothing to tell
            guardian_report.remove(guardian_report.path_of(self.directory, self.instance))

    def _write(self, durable: bool = False) -> None:
        guardian_report.write(self.directory, self.instance, self.data, durable=durable)


def stop_everything(what: Protected, grace: float, report: Report | None = None) -> None:
    """SIGTERM, up to `grace` seconds, then SIGKILL until nothing protected is left; the report says so."""
    procs, groups = remaining(what, marks=True)
    if report is not None:
        report.saw_death(what, time.time())
    if not procs and not groups:
        _remove_cgroups(what)
        if report is not None:
            report.done(what)
        return
    if report is not None:
        report.terminating()
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
    if (procs or groups) and report is not None:
        report.killing(what)
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
    if report is not None:
        report.done(what)
    _remove_cgroups(what)


def _remove_cgroups(what: Protected) -> None:
    for cgroup in what.cgroups:
        SessionCgroup(Path(cgroup)).remove()


def main(argv: list[str] | None = None) -> int:
    """`guardian GRACE`; with REPORT_ENV (`DAEMON_PID.START:DATA_DIR`) in its environment it reports there."""
    args = sys.argv[1:] if argv is None else argv
    grace = float(args[0]) if args else 5.0
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    instance, _, directory = os.environ.get(guardian_report.REPORT_ENV, "").partition(":")
    report = Report(directory, instance) if instance and directory else None
    what = Protected()
    for raw in sys.stdin.buffer:
        what.apply(raw.decode("utf-8", "replace").rstrip("\n"))
    if what:
        stop_everything(what, grace, report)
    elif report is not None:
        report.done(what)
    return 0


if __name__ == "__main__":
    sys.exit(main())
