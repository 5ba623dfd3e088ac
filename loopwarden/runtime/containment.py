"""Every process a session started, wherever it went, and ending all of them.

A session's processes are the union of four things, so that leaving one of them is not
enough to survive the session:

* its cgroup (when the daemon has cgroup v2; see cgroups.py), which nothing leaves
  without write access to a `cgroup.procs` above it;
* its process group, started after the agent (a reused group id is not ours);
* processes seen in its tree by an earlier sample that have since left the group
  (`setsid`) or the tree (a double fork): remembered by pid and start time;
* orphans that came back to the daemon (it is a child subreaper) carrying the
  session's `LOOPWARDEN_SESSION` mark in their environment;

and everything below any of them. Every signal goes to a `ProcId`, never to a bare pid.
"""

from __future__ import annotations

import asyncio
import errno
import os
import resource
import select
import signal
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from typing import Protocol

import anyio
import anyio.lowlevel

from . import oom
from .cgroups import SessionCgroup
from .procfs import MARK_ENV, ProcId, ProcTable, child_tokens, proc_id, read_stat, signal_exact, signal_group

POLL_SECONDS = 0.05  # where there are no pidfds: how often to look again while processes go
RESCAN_SECONDS = 0.25  # during the grace, look for new processes (forks) at least this often
KILL_RESCAN = 0.1  # ... and after SIGKILL
KILL_WAIT = 1.0  # after SIGKILL, how long to wait for the kernel to finish them
SHARED_SCAN_AGE = 0.03  # sessions ending together share /proc scans this fresh
GATHER_SECONDS = 0.004  # a look for the processes of sessions ending waits this long for others to join it


class Guard(Protocol):
    """Where a session reports what the guardian must kill if the daemon dies (see guardian.py)."""

    def protect(self, kind: str, value: str) -> None: ...
    def forget(self, kind: str, value: str) -> None: ...


class Containment:
    """The processes of one session: found by cgroup, group, remembered identity and mark; ended together."""

    def __init__(self, sid: str, *, mark: str | None = None, cgroup: SessionCgroup | None = None,
                 guard: Guard | None = None, daemon_pid: int | None = None, oom_score: int | None = None) -> None:
        self.sid = sid
        self.oom_score = oom_score  # the agent's oom_score_adj (oom.py); None: the daemon's
        self.daemon_pid = os.getpid() if daemon_pid is None else daemon_pid
        self.mark = mark or f"{sid}@{daemon_instance()}"
        self.cgroup = cgroup
        self.guard = guard
        self.root: ProcId | None = None
        self._told = ""  # the guardian's line for the root's group (guardian.py), to forget it by
        self._rooted = 0.0  # when the root became known (monotonic): a table taken before cannot show it
        self.tracked: set[ProcId] = set()  # seen outside the group and the cgroup; the guardian knows them too
        self.walk = False  # find members by walking from seeds (see table()); the daemon sets it as subreaper
        self.emptied = False  # end() found nothing left: with no process of the session alive, none can come
        self.group_gone = False  # the agent and its group are gone: a group with its id now is another's
        self._cgroup_seen: tuple[ProcTable | None, set[int]] = (None, set())
        self.sweep: Sweep | None = None  # the daemon's, shared by its sessions (else one per daemon pid)
        self._released = False

    # ---- starting -----------------------------------------------------------
    def command(self, argv: list[str]) -> list[str]:
        """The command to start: `argv`, raising its OOM score (oom.py) and entering the session's cgroup first.
        Every launched agent starts here."""
        if self.oom_score is not None:
            return oom.wrap(argv, self.oom_score, str(self.cgroup.path / "cgroup.procs") if self.cgroup else None)
        return self.cgroup.wrap(argv) if self.cgroup is not None else argv

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The agent's environment with the session's mark, by which its orphans are recognised."""
        return {**env, MARK_ENV: self.mark}

    def started(self, pid: int, stdout_inode: int | None = None) -> None:
        """The agent runs as `pid`, leader of its own process group; its stdout is the pipe `stdout_inode` (the
        guardian reports what was left unread in it if the daemon dies)."""
        self.root = proc_id(pid) or ProcId(pid, 0)
        self._rooted = time.monotonic()
        _ROOTS.add(pid)
        _ROOT_TOKENS.add(str(pid).encode())
        self._told = f"{self.root.pid} {self.root.start} {self.sid}" + (f" {stdout_inode}" if stdout_inode else "")
        self._tell("+", "g", self._told)

    # ---- finding ------------------------------------------------------------
    async def table(self) -> ProcTable:
        """A table that holds every process of the session now. With `walk` (the daemon is a child
        subreaper), the processes reachable from the session's seeds: its root, its cgroup, the processes
        it is remembered for, and the daemon's children that are no session's agent (orphans that came
        back). Every member of the agent's group descends from one of those, since an orphan comes back
        to the daemon and only the session's own processes can join its group. Sessions that look in the
        same pass of the event loop share one look (see Sweep). Otherwise one shared pass over /proc."""
        if not self.walk:
            return await fresh_table()
        return await (self.sweep or sweep_of(self.daemon_pid)).table(self)

    def seeds(self) -> tuple[set[int], set[int]]:
        """Where a walk for the session's processes starts (its root and the processes it is remembered
        for, and those in its cgroup), and the processes in its cgroup, read now."""
        in_cgroup = self.cgroup.pids() if self.cgroup is not None else set()
        seeds = {p.pid for p in self.tracked}
        if self.root is not None:
            seeds.add(self.root.pid)
        return seeds | in_cgroup, in_cgroup

    def members(self, table: ProcTable | None = None) -> set[ProcId]:
        """Every live process of the session now."""
        if table is None or self._predates_root(table):  # the agent's absence from it would read as its end
            table = ProcTable.scan()
        seeds: set[int] = set()
        if self.root is not None and not self.group_gone:
            if table.is_current(self.root):
                seeds.add(self.root.pid)
                seeds |= table.group(self.root.pid, born_after=self.root.start)
            else:
                seeds |= self._group_left(table)
        if self.cgroup is not None:
            seen, in_cgroup = self._cgroup_seen
            seeds |= {pid for pid in (in_cgroup if seen is table else self.cgroup.pids()) if table.live(pid)}
        seeds |= {p.pid for p in self.tracked if table.is_current(p)}
        for pid in table.strays(self.daemon_pid, _ROOTS):  # not an agent (its own session's root, or a seed)
            if pid not in seeds and table.mark(pid) == self.mark:
                seeds.add(pid)  # an orphan that came back to the daemon, unseen until now
        return {table.procs[pid].id for pid in table.descendants(seeds) if table.live(pid)}

    def _group_left(self, table: ProcTable) -> set[int]:
        """The agent's group once the agent is gone. The kernel gives no new process a pid that is still some
        group's id, so when the agent's pid names another process, or its group was once seen empty, any group
        with that id is another session's: it is never taken (nor signalled) again."""
        assert self.root is not None
        group = set() if table.live(self.root.pid) else table.group(self.root.pid, born_after=self.root.start)
        if not group:
            self.group_gone = True
        return group

    def observe(self, table: ProcTable) -> None:
        """Remember the processes that left the group and the cgroup (so a later double fork cannot hide
        them), and tell the guardian; forget those that are gone."""
        if self._predates_root(table):
            return  # a sampler's table scanned before the agent started: nothing in it to remember
        in_cgroup = self.cgroup.pids() if self.cgroup is not None else set()
        self._cgroup_seen = (table, in_cgroup)
        group = self.root.pid if self.root is not None else None
        for proc in self.members(table):
            info = table.procs[proc.pid]
            if info.pgid != group and proc.pid not in in_cgroup and proc not in self.tracked:
                self.tracked.add(proc)
                self._tell("+", "p", f"{proc.pid} {proc.start} {self.sid}")
        for proc in [p for p in self.tracked if not table.is_current(p)]:
            self.tracked.discard(proc)
            self._tell("-", "p", f"{proc.pid} {proc.start} {self.sid}")

    def _predates_root(self, table: ProcTable) -> bool:
        return self.root is not None and table.taken < self._rooted

    # ---- ending -------------------------------------------------------------
    def abandon_start(self) -> None:
        """The session is stopped before its agent started: a start that may wait (a pod's) ends now."""

    def signal_leader(self, pid: int, sig: int) -> None:
        """`sig` to the agent's process group (`pid` leads it), as pause and resume send it."""
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def signal(self, sig: int, members: set[ProcId] | None = None, fds: Pidfds | None = None) -> int:
        """Send `sig` to every process of the session; how many there were. `fds`: pidfds opened for
        these processes, kept across the signals and waits of one end."""
        members = self.members() if members is None else members
        if self.root is not None and any(self._in_group(p) for p in members):
            signal_group(self.root.pid, sig)  # at once for the group, so a fork in between is not missed
        for proc in members:
            if fds is None:
                signal_exact(proc, sig)
            else:
                fds.signal(proc, sig)
        return len(members)

    def _in_group(self, proc: ProcId) -> bool:
        try:
            return self.root is not None and os.getpgid(proc.pid) == self.root.pid
        except OSError:
            return False

    async def end(self, grace: float) -> set[ProcId]:
        """SIGTERM to every process, up to `grace` seconds for them to go, then SIGKILL until none is left
        (at most KILL_WAIT more); returns the survivors, normally none. Between looks it waits for the
        processes' exits (pidfds, one per process for all its signals and waits), looking again for new
        ones at least every RESCAN_SECONDS."""
        if self.emptied:
            return set()
        left = self.members(await self.table())
        if not left:
            self.emptied = True
            return left
        with Pidfds() as fds:
            if grace > 0:
                warned: set[ProcId] = set()
                deadline = time.monotonic() + grace
                while left and time.monotonic() < deadline:
                    new = left - warned
                    if new:
                        self.signal(signal.SIGCONT, new, fds)  # a stopped process cannot act on SIGTERM
                        self.signal(signal.SIGTERM, new, fds)
                        warned |= new
                    await wait_gone(left, min(RESCAN_SECONDS, max(0.0, deadline - time.monotonic())), fds)
                    fds.drop_exited()
                    left = self.members(await self.table())
                    fds.retain(left)
            deadline = time.monotonic() + KILL_WAIT
            while left:
                self.kill_now(left, fds)
                if time.monotonic() >= deadline:
                    break
                await wait_gone(left, min(KILL_RESCAN, max(0.0, deadline - time.monotonic())), fds)
                fds.drop_exited()
                left = self.members(await self.table())
                fds.retain(left)
        self.emptied = not left
        return left

    def kill_now(self, members: set[ProcId] | None = None, fds: Pidfds | None = None) -> None:
        """SIGKILL every process of the session at once, without waiting."""
        if self.cgroup is not None:
            self.cgroup.kill()
        self.signal(signal.SIGKILL, members, fds)

    def release(self) -> None:
        """The session has ended: remove its cgroup and let the guardian forget it (once)."""
        if self._released:
            return
        self._released = True
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.root is not None:
            _ROOTS.discard(self.root.pid)
            _ROOT_TOKENS.discard(str(self.root.pid).encode())
            self._tell("-", "g", self._told)
        for proc in self.tracked:
            self._tell("-", "p", f"{proc.pid} {proc.start} {self.sid}")
        self.tracked.clear()

    def _tell(self, sign: str, kind: str, value: str) -> None:
        if self.guard is None:
            return
        if sign == "+":
            self.guard.protect(kind, value)
        else:
            self.guard.forget(kind, value)


_ROOTS: set[int] = set()  # the agents of this daemon's sessions: none is another session's orphan
_ROOT_TOKENS: set[bytes] = set()  # ... as /proc lists them: the daemon's children are mostly these


class Pidfds:
    """A pidfd per process of a session's end, opened once for all its signals and waits (the identity
    checked when it is opened: a pidfd names that one process for good). Where the kernel has no pidfds,
    each signal checks and kills, and a wait is a short sleep."""

    held = 0  # pidfds open in all ends of this daemon together
    most = 256  # ... at most: past it a process is signalled by signal_exact and waited for by polling

    def __init__(self) -> None:
        self.fds: dict[ProcId, int | None] = {}  # None: gone (or the pid names another process now)
        self.usable = True

    def __enter__(self) -> Pidfds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.retain(set())

    def _close(self, proc: ProcId) -> None:
        fd = self.fds.pop(proc)
        if fd is not None:
            os.close(fd)
            Pidfds.held -= 1

    def retain(self, procs: set[ProcId]) -> None:
        """Close the pidfds of processes no longer among `procs` (gone): a session that forks all through its
        grace holds no more descriptors than it has processes."""
        for proc in [p for p in self.fds if p not in procs]:
            self._close(proc)

    def drop_exited(self) -> None:
        """Close the pidfds of the processes that have exited (readable), before the next look."""
        poller = select.poll()
        by_fd = {fd: proc for proc, fd in self.fds.items() if fd is not None}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(0) if by_fd else ():
            self._close(by_fd[fd])

    def get(self, proc: ProcId) -> int | None:
        """The pidfd of this very process, or None when it is gone, a zombie, pidfds are not usable, or
        none is held for it (`holds` says which)."""
        if proc in self.fds:
            return self.fds[proc]
        if not self.usable or Pidfds.held >= Pidfds.most:
            return None
        try:
            fd = os.pidfd_open(proc.pid)
        except ProcessLookupError:
            self.fds[proc] = None
            return None
        except AttributeError:
            self.usable = False
            return None
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
                self.usable = False  # no pidfds in this kernel
            return None  # else: none now, so none held; signal_exact and polling do without
        info = read_stat(proc.pid)
        if info is None or info.zombie or not proc.matches(info):
            os.close(fd)
            if info is not None:  # a zombie, or another process has the pid now: ours is gone
                self.fds[proc] = None
            return None  # else its stat unreadable: not settled, signal_exact looks again
        Pidfds.held += 1
        self.fds[proc] = fd
        return fd

    def holds(self, proc: ProcId) -> bool:
        """Whether `proc` was settled here: a pidfd held for it, or known gone."""
        return proc in self.fds

    def signal(self, proc: ProcId, sig: int) -> None:
        fd = self.get(proc)
        if fd is not None:
            try:
                signal.pidfd_send_signal(fd, sig)
            except OSError:
                pass
        elif not self.holds(proc):
            signal_exact(proc, sig)


def more_descriptors() -> int:
    """Raise this process's soft limit of open files to its hard limit (the daemon: every live session
    holds pipes, a pidfd and spill files, and 200 sessions come near the usual 1024), and size the pidfds
    that ends may hold together to it; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass  # keep the soft limit
    if soft != resource.RLIM_INFINITY:
        Pidfds.most = max(16, min(Pidfds.most, soft // 8))
    return soft


async def wait_gone(procs: set[ProcId], at_most: float, fds: Pidfds | None = None) -> None:
    """Return once every process of `procs` has exited (or is another process now), or after `at_most` seconds:
    its pidfd each (from `fds`, else opened here), waited on by the event loop; a short sleep where the
    kernel has no pidfds."""
    if at_most <= 0:
        await anyio.lowlevel.checkpoint()
        return
    with Pidfds() if fds is None else nullcontext(fds) as handles:
        waits = [fd for fd in map(handles.get, procs) if fd is not None]
        if not handles.usable or not all(map(handles.holds, procs)):  # some without a pidfd: poll
            await anyio.sleep(min(POLL_SECONDS, at_most))
            return
        if not waits:
            await anyio.lowlevel.checkpoint()
            return
        await _readable_all(waits, at_most)


async def _readable_all(fds: list[int], at_most: float) -> None:
    """Until every one of `fds` is readable (a pidfd: its process exited), or `at_most` seconds: one future
    for them all, woken by the loop's reader callbacks (no cancel scope and wait per descriptor)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    pending = set(fds)

    def ready(fd: int) -> None:
        loop.remove_reader(fd)
        pending.discard(fd)
        if not pending and not done.done():
            done.set_result(None)

    def late() -> None:
        if not done.done():
            done.set_result(None)

    for fd in fds:
        loop.add_reader(fd, ready, fd)
    timer = loop.call_later(at_most, late)
    try:
        await done
    finally:
        timer.cancel()
        for fd in pending:
            loop.remove_reader(fd)


class _Look:
    """One look at the processes of the sessions that asked for it before it began."""

    def __init__(self) -> None:
        self.sessions: dict[int, Containment] = {}
        self.done = anyio.Event()
        self.table: ProcTable | None = None


class Sweep:
    """One process map per sweep: the sessions of a daemon that look for their processes within GATHER_SECONDS
    of each other (ending together: stop-daemon, exits that come together, `kill` requests one after another)
    share one look, which reads the daemon's children (where orphans come back) once and walks one table from
    all their seeds; each session's cgroup is read in that look too. A session joins only a look that has not
    begun, so what it gets is as fresh as a look of its own at the moment it asked; an orphan that comes back
    after the look is found by the session's next one (an end looks again until nothing of the session is
    left). A look waits at most GATHER_SECONDS for those that join it."""

    def __init__(self, daemon_pid: int, helpers: Callable[[], set[int]] = set,
                 gather: float | None = None) -> None:
        self.daemon_pid = daemon_pid
        self.helpers = helpers  # the daemon's own children that are no agent's nor orphan (the guardian)
        self.gather = GATHER_SECONDS if gather is None else gather
        self.asked = 0  # how many tables sessions asked for
        self.looks = 0  # ... and how many looks were taken for them (each one read of the daemon's children)
        self._next: _Look | None = None

    async def table(self, session: Containment) -> ProcTable:
        """A table that holds every process of `session` now (and of the sessions looking with it)."""
        self.asked += 1
        look = self._next
        if look is None:  # the look begins in a callback of its own, so a caller cancelled meanwhile delays nobody
            look = self._next = _Look()
            asyncio.get_running_loop().call_later(self.gather, self._begin, look)
        look.sessions[id(session)] = session  # not begun yet: its read of the daemon's children comes after this
        await look.done.wait()
        return look.table if look.table is not None else self._look([session])

    def _begin(self, look: _Look) -> None:
        self._next = None  # from here on a caller needs a look that begins after it asked
        try:
            look.table = self._look(look.sessions.values())
        finally:  # (failed: each caller looks for itself)
            look.done.set()

    def _look(self, sessions: Iterable[Containment]) -> ProcTable:
        """The sessions' own trees first, then the daemon's children: a process that exits after its walk
        has handed its children to the daemon before that read (and was seen live, so its session looks
        again); one that exited before the walk had handed them over already."""
        self.looks += 1
        seeds: set[int] = set()
        seen: list[tuple[Containment, set[int]]] = []
        for session in sessions:
            own, in_cgroup = session.seeds()
            seeds |= own
            seen.append((session, in_cgroup))
        table = ProcTable.around(seeds)
        table.extend(set(map(int, set(child_tokens(self.daemon_pid)) - _ROOT_TOKENS)) - self.helpers())
        for session, in_cgroup in seen:
            session._cgroup_seen = (table, in_cgroup)  # members() of this table needs not read the cgroup again
        return table


_SWEEPS: dict[int, Sweep] = {}


def sweep_of(daemon_pid: int) -> Sweep:
    """The sweep shared by the sessions of `daemon_pid` that were given none."""
    sweep = _SWEEPS.get(daemon_pid)
    if sweep is None:
        sweep = _SWEEPS[daemon_pid] = Sweep(daemon_pid)
    return sweep


_last_scan: tuple[float, ProcTable] = (0.0, ProcTable())
_scanning: anyio.Event | None = None  # set when the scan under way is done


async def fresh_table(max_age: float = SHARED_SCAN_AGE) -> ProcTable:
    """A /proc table at most `max_age` old, scanned in a worker thread (a scan of a few thousand
    processes takes tens of milliseconds, which the event loop must not wait for). Callers that
    arrive while a scan is under way wait for it and share it: a hundred sessions stopped at
    once cost one scan, not a hundred."""
    global _last_scan, _scanning
    while time.monotonic() - _last_scan[0] > max_age:
        if _scanning is not None:
            await _scanning.wait()
            continue
        _scanning = done = anyio.Event()
        try:
            with anyio.CancelScope(shield=True):  # others wait on it: it must finish
                table = await anyio.to_thread.run_sync(ProcTable.scan)
            _last_scan = (time.monotonic(), table)
        finally:
            _scanning = None
            done.set()
    return _last_scan[1]


def daemon_instance(pid: int | None = None) -> str:
    """`PID.START` of a daemon: the part of the mark shared by all its sessions."""
    pid = os.getpid() if pid is None else pid
    me = proc_id(pid)
    return f"{pid}.{me.start if me else 0}"
