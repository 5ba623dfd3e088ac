"""Processes as /proc shows them: one-pass tables, identities that survive pid reuse, exact signals.

A pid alone can name a different process tomorrow; a `ProcId` is a pid plus its start
time (clock ticks after boot), so nothing here ever signals a process that merely
reuses the number. Standard library only: the guardian imports it too.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

MARK_ENV = "LOOPWARDEN_SESSION"  # set in every agent's environment: "SID@DAEMON_PID.DAEMON_START"


@dataclass(frozen=True, slots=True)
class ProcId:
    """One process for good: its pid and its start time in clock ticks after boot."""

    pid: int
    start: int

    def matches(self, info: ProcInfo) -> bool:
        """Whether `info` is this very process (not another that reuses the pid)."""
        return info.pid == self.pid and info.start == self.start


@dataclass(frozen=True, slots=True)
class ProcInfo:
    """The fields of /proc/PID/stat that tracking and telling principals apart need."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int
    zombie: bool
    comm: str = ""  # the command name (15 characters at most); the agent chooses it
    tty_nr: int = 0  # the controlling terminal (0: none)
    cpu: int = 0  # user + system time, clock ticks
    rss: int = 0  # resident pages
    state: str = ""  # one letter: R running, S sleeping, D disk sleep, T stopped, Z zombie...
    threads: int = 0  # how many threads it has (0: not read)

    @property
    def id(self) -> ProcId:
        return ProcId(self.pid, self.start)


def read_stat(pid: int) -> ProcInfo | None:
    """`pid`'s stat line, or None when there is no such process (or it cannot be read)."""
    raw = read_small(f"/proc/{pid}/stat")
    return None if raw is None else _parse_stat(pid, raw)


def _parse_stat(pid: int, raw: bytes) -> ProcInfo | None:
    close = raw.rfind(b")")  # the name may hold spaces and ')'; it ends at the last ')'
    rest = raw[close + 2:].split()  # state ppid pgrp session tty_nr ... starttime (the 20th)
    try:
        return ProcInfo(pid, int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]), rest[0] in (b"Z", b"X"),
                        raw[raw.find(b"(") + 1:close].decode(errors="replace"), int(rest[4]),
                        int(rest[11]) + int(rest[12]), int(rest[21]), rest[0].decode(errors="replace"), int(rest[17]))
    except (IndexError, ValueError):
        return None


def read_small(path: str, limit: int = 4096) -> bytes | None:
    """A small /proc file in one read (unbuffered: a third of open()'s cost; this runs per connection)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


ANCESTRY_LIMIT = 256  # processes read up a parent chain; a deeper chain counts as one that could not be traced


def ancestry(pid: int, limit: int = ANCESTRY_LIMIT) -> tuple[ProcInfo, ...]:
    """`pid` and its ancestors, nearest first; it ends early when a process cannot be read."""
    chain: list[ProcInfo] = []
    seen: set[int] = set()
    while pid > 0 and pid not in seen and len(chain) < limit:
        info = read_stat(pid)
        if info is None:
            break
        chain.append(info)
        seen.add(pid)
        pid = info.ppid
    return tuple(chain)


def command_line(pid: int) -> list[str]:
    raw = read_small(f"/proc/{pid}/cmdline", 1 << 16)
    if raw is None:
        return []
    return [arg.decode(errors="replace") for arg in raw.split(b"\0")[:-1]]


def environment_value(pid: int, name: str) -> str | None:
    """One variable of a process's environment (as it was started), or None."""
    raw = read_small(f"/proc/{pid}/environ", 1 << 20)
    if raw is None:
        return None
    key = name.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(key):
            return item[len(key):].decode(errors="replace")
    return None


def proc_id(pid: int) -> ProcId | None:
    """The identity of a live (not zombie) process, or None."""
    info = read_stat(pid)
    return None if info is None or info.zombie else info.id


def alive(proc: ProcId) -> bool:
    """Whether this very process still runs (a zombie or a reused pid does not)."""
    return proc_id(proc.pid) == proc


@dataclass
class ProcTable:
    """Every process at one instant (one pass over /proc), with a pid -> children map."""

    procs: dict[int, ProcInfo] = field(default_factory=dict)
    children: dict[int, list[int]] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)  # pgid -> member pids
    _marks: dict[int, str | None] = field(default_factory=dict)
    _strays: dict[int, tuple[int, ...]] = field(default_factory=dict)  # see strays()
    taken: float = field(default_factory=time.monotonic)  # when its look began: a process started later is not in it

    @classmethod
    def scan(cls) -> ProcTable:
        table = cls()
        try:
            names = os.listdir("/proc")
        except OSError:
            return table
        for name in names:
            if not name.isdigit():
                continue
            info = read_stat(int(name))
            if info is None:
                continue
            table.procs[info.pid] = info
            table.children.setdefault(info.ppid, []).append(info.pid)
            table.groups.setdefault(info.pgid, []).append(info.pid)
        return table

    def live(self, pid: int) -> ProcInfo | None:
        info = self.procs.get(pid)
        return None if info is None or info.zombie else info

    def is_current(self, proc: ProcId) -> bool:
        """Whether `proc` is in this table as itself (same start time), and not a zombie."""
        info = self.live(proc.pid)
        return info is not None and info.start == proc.start

    def descendants(self, roots: set[int]) -> set[int]:
        """`roots` and everything below them."""
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            stack.extend(self.children.get(pid, ()))
        return seen

    @classmethod
    def around(cls, seeds: Iterable[int]) -> ProcTable:
        """The processes reachable from `seeds` through their children lists, without a pass over /proc:
        what one session's processes cost to find is then its own size, not the machine's."""
        return cls().extend(seeds)

    def extend(self, seeds: Iterable[int]) -> ProcTable:
        """Add the processes reachable from `seeds` that the table does not hold yet; the table."""
        stack = list(seeds)
        while stack:
            pid = stack.pop()
            if pid in self.procs:
                continue
            info = read_stat(pid)
            if info is None:
                continue
            self.procs[pid] = info
            self.children.setdefault(info.ppid, []).append(pid)
            self.groups.setdefault(info.pgid, []).append(pid)
            stack.extend(children_of(pid, info.threads))
        self._strays.clear()
        return self

    def strays(self, parent: int, known: set[int]) -> tuple[int, ...]:
        """`parent`'s live children that are not among `known`, listed once per table and parent (`known` as
        it is at the first call: a table is one instant): the daemon's children other than its agents, where
        every session sampled from the table looks for its orphans."""
        found = self._strays.get(parent)
        if found is None:
            found = self._strays[parent] = tuple(pid for pid in self.children.get(parent, ())
                                                 if pid not in known and self.live(pid))
        return found

    def mark(self, pid: int) -> str | None:
        """`pid`'s MARK_ENV (see environ_mark), read once per process however many sessions and tables ask."""
        if pid not in self._marks:
            info = self.procs.get(pid)
            key = (pid, info.start) if info is not None else None
            if key is not None and key in _MARKS:
                self._marks[pid] = _MARKS[key]
            else:
                self._marks[pid] = environ_mark(pid)
                if key is not None:
                    if len(_MARKS) >= MARKS_KEPT:
                        _MARKS.clear()
                    _MARKS[key] = self._marks[pid]
        return self._marks[pid]

    def group(self, pgid: int, born_after: int = 0) -> set[int]:
        """Live members of process group `pgid` started at or after `born_after` (a reused pgid is not ours)."""
        members = (self.procs[pid] for pid in self.groups.get(pgid, ()))
        return {p.pid for p in members if not p.zombie and p.start >= born_after}


MARKS_KEPT = 4096
_MARKS: dict[tuple[int, int], str | None] = {}  # (pid, start) -> its mark: the environment it started with


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
STATUS = {"R": "running", "S": "sleeping", "D": "disk-sleep", "T": "stopped", "t": "tracing-stop",
          "Z": "zombie", "X": "dead", "x": "dead", "K": "wake-kill", "W": "waking", "P": "parked", "I": "idle"}


def open_fds(pid: int) -> int:
    """How many files `pid` has open (0 when that cannot be read)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def children_of(pid: int, threads: int = 0) -> set[int]:
    """`pid`'s children, from the children list of each of its threads (empty when it is gone). With
    `threads` 1 (read from its stat just before), the one list is read without listing the threads: a
    thread started since could have forked in between, as a fork after the read always could, which is
    why a session's end looks again until nothing of it is left."""
    return set(map(int, child_tokens(pid, threads)))


def child_tokens(pid: int, threads: int = 0) -> list[bytes]:
    """`pid`'s children as the kernel lists them, each pid in ASCII (see children_of): what a caller that
    skips most of them compares, without turning every one into a number."""
    if threads == 1:
        raw = read_small(f"/proc/{pid}/task/{pid}/children", 1 << 20)
        return raw.split() if raw else []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[bytes] = []
    for task in tasks:
        raw = read_small(f"/proc/{pid}/task/{task}/children", 1 << 20)
        if raw:
            out += raw.split()
    return out


def environ_mark(pid: int) -> str | None:
    """The value of MARK_ENV in `pid`'s environment as it started, or None."""
    return environment_value(pid, MARK_ENV)


def signal_exact(proc: ProcId, sig: int) -> bool:
    """Send `sig` to this very process (through a pidfd where the kernel has them); False when it is gone."""
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):  # no pidfd here: check, then kill (a reuse in between is all but impossible)
        if not alive(proc):
            return False
        try:
            os.kill(proc.pid, sig)
        except OSError:
            return False
        return True
    try:
        if proc_id(proc.pid) != proc:
            return False  # the fd may name a newer process with the same pid
        signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def signal_group(pgid: int, sig: int) -> None:
    """Signal a whole process group; a group that is gone is no error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
