"""The daemon's watch over the agents' processes: containment, the guardian, sampling, reaping, listing a tree."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import psutil

from ..sessions.base import Capability
from . import oom
from ..paths import Paths
from .cgroups import CgroupTree
from .containment import Containment, Sweep, daemon_instance
from .contract import Supervised
from .guardian_link import GuardianLink
from .procfs import ProcTable
from .reaper import children_exited, reap_orphans
from .registry import Sessions
from .session import tree_pids

REAP_RETRY = 0.05  # seconds between rounds; a zombie session leader passed over is looked at again then
SAMPLE_SECONDS = 0.5  # 2 Hz with few sessions
SAMPLES_PER_SECOND = 20  # ... and at most this many session samples a second
SAMPLE_SLICE = 10  # sessions sampled between two turns of the event loop's other tasks (~0.1-0.25 ms each)


def wait_children_by_pidfd() -> bool:
    """Have asyncio wait for the agents' exits with a pidfd each on the event loop (Python 3.11 would
    start a thread per child, blocked in waitpid); already so from Python 3.12, and where pidfds work."""
    if sys.version_info >= (3, 12) or not hasattr(asyncio, "PidfdChildWatcher"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)
    return True


def adoption_refusal(pid: int, peer_pid: int) -> str | None:
    """Why a pid must not be adopted (killing it would take down the system or the caller), or None."""
    if pid == 1:
        return "refusing to adopt pid 1 (init): its runtime limit would kill the whole system"
    protected = {os.getpid()}
    for start in (os.getpid(), peer_pid):
        try:
            proc = psutil.Process(start)
            protected.update(p.pid for p in [proc, *proc.parents()])
        except psutil.Error:
            pass
    if pid in protected:
        return (f"refusing to adopt pid {pid}: it is the daemon, the calling shell or one of their parents, "
                "and a limit would kill it")
    return None


async def sample_round(sessions: list[Any]) -> None:
    """One sampler round over `sessions`: one pass over /proc (in a worker thread), then each session that is
    not stopping or final remembers the processes that left its group and measures its tree. The event loop
    runs other tasks after every SAMPLE_SLICE sessions (a round of 200 held it for 25-70 ms at once: requests,
    handshakes and kills waited that long); a session that began to stop meanwhile is passed over."""
    live = [s for s in sessions if not (s.final or s.stopping)]  # a stopping session's end looks for itself
    if not live:
        return  # every one is stopping (a stop-daemon, many kills): no pass over /proc for none
    table = await anyio.to_thread.run_sync(ProcTable.scan)
    for i, session in enumerate(live):
        if i and not i % SAMPLE_SLICE:
            await anyio.lowlevel.checkpoint()
        if not (session.final or session.stopping):  # a stopping session's end looks for itself
            session.observe(table)
            await session.sample(table.children)  # marks the session dirty only when numbers moved


PROCESS_ROWS = 200
CMDLINE_CHARS = 200


def process_rows(root: int, group: bool, cache: dict[int, psutil.Process]
                 ) -> tuple[list[dict[str, Any]], dict[int, psutil.Process]]:
    """Rows for `root`'s tree (plus its process group when `group`), root first, and the process cache
    for the next call: a cached process measures its CPU since the previous call, a new one reads 0."""
    children: dict[int, list[int]] = {}
    members: list[int] = []
    for proc in psutil.process_iter(["ppid"]):
        ppid = proc.info.get("ppid")
        if ppid:
            children.setdefault(ppid, []).append(proc.pid)
        if group:
            try:
                if os.getpgid(proc.pid) == root:
                    members.append(proc.pid)
            except OSError:
                pass
    pids = tree_pids(root, children)
    seen = set(pids)
    pids += [pid for pid in members if pid not in seen]
    rows, kept = [], {}
    for pid in pids[:PROCESS_ROWS]:
        try:
            cached = cache.get(pid)
            proc = cached if cached is not None and cached.is_running() else psutil.Process(pid)
            with proc.oneshot():
                row = {"pid": pid, "ppid": proc.ppid(), "name": proc.name(), "cpu_percent": proc.cpu_percent(None),
                       "rss": proc.memory_info().rss, "status": proc.status()}
            try:
                row["cmdline"] = " ".join(proc.cmdline())[:CMDLINE_CHARS]
            except psutil.Error:  # a zombie has no command line
                row["cmdline"] = ""
        except psutil.Error:
            continue
        rows.append(row)
        kept[pid] = proc
    return rows, kept


class ProcessListing:
    """`processes`: a session's tree, each process measured against the previous listing of it (CPU needs a base)."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self._cache: dict[str, dict[int, psutil.Process]] = {}  # per session, so cpu_percent has a base

    async def rows(self, sid: str) -> list[dict[str, Any]]:
        """The agent's process tree (and, for a session that owns its process group, the whole group)."""
        for ended in [k for k, s in self.sessions.items() if s.final and k in self._cache]:
            del self._cache[ended]
        session = self.sessions.get(sid)
        if session is None or session.final or not session.pid or getattr(session, "pod", None) is not None:
            return []  # (a pod's pid is not this machine's)
        root, cache = session.pid, self._cache.get(sid, {})
        group = Capability.PROCESS_GROUP in session.capabilities
        rows, self._cache[sid] = await anyio.to_thread.run_sync(lambda: process_rows(root, group, cache))
        return rows

    def forget(self, sid: str, session: Supervised | None) -> None:
        """A session left the daemon's memory."""
        self._cache.pop(sid, None)


class ProcessWatch:
    """Containment, the guardian, CPU and memory samples, orphans reaped."""

    def __init__(self, paths: Paths, sessions: Sessions, *, log: Callable[[str], None]) -> None:
        self.paths = paths
        self.sessions = sessions
        self.log = log
        self.guardian = GuardianLink(log)
        self.cgroups: CgroupTree | None = None
        self.kind = "tracking"  # how sessions' processes are found: "cgroup" or "tracking"
        self.agent_oom: int | None = None  # the oom_score_adj agents start with (oom.py); None: the daemon's
        self.instance = ""  # "PID.START" of this daemon, the end of every agent's LOOPWARDEN_SESSION
        self.subreaper = False  # orphans of agents come back to the daemon (reaper.py)
        self._sweep: Sweep | None = None  # shared by the sessions' containments: those ending together look once
        self._orphans = anyio.Event()
        self._sampler_wake = anyio.Event()
        sessions.watch(self._session_added)

    def start_guardian(self) -> None:
        """Find how sessions' processes will be contained, start the guardian and tell it so."""
        self.instance = daemon_instance()
        self.cgroups, how = CgroupTree.create()
        self.kind = "cgroup" if self.cgroups else "tracking"
        self.log(f"process containment: {how}" if self.cgroups else
                 f"process containment: process groups, /proc tracking and marks ({how})")
        self.agent_oom, said = oom.agent_score()
        self.log(said)  # once: a failure is never fatal, agents then keep the daemon's score
        self.guardian.report = (str(self.paths.data), self.instance)  # what it did, for the next daemon (lost.py)
        self.guardian.start()
        self.guardian.protect("m", f"@{self.instance}")  # every agent's LOOPWARDEN_SESSION ends with it
        if self.cgroups is not None:
            self.guardian.protect("c", str(self.cgroups.path))

    def containment(self, sid: str, keeper: str | None = None) -> Containment:
        """How session `sid`'s processes are found and ended. A kept agent (`keeper`: its keeper's "PID.START")
        outlives the daemon: the guardian is not told of it, its mark names its keeper, it has no cgroup under the
        daemon's, and its orphans go to the keeper (found by their mark, not by walking the daemon's children)."""
        if keeper is not None:  # its orphans come back to the keeper, a child subreaper
            containment = Containment(sid, mark=f"{sid}@{keeper}", daemon_pid=int(keeper.split(".")[0]),
                                      oom_score=self.agent_oom)
        else:
            cgroup = self.cgroups.session(sid) if self.cgroups is not None else None
            containment = Containment(sid, mark=f"{sid}@{self.instance}", cgroup=cgroup, guard=self.guardian,
                                      oom_score=self.agent_oom)
            containment.walk = self.subreaper  # orphans come back to us: no pass over /proc to find them
        if self._sweep is None:
            self._sweep = Sweep(os.getpid(), self._live_helpers)
        containment.sweep = self._sweep
        return containment

    def helpers(self) -> set[int]:
        """The daemon's own children that are not agents: its guardian."""
        guardian_pid = self.guardian.pid
        return {guardian_pid} if guardian_pid is not None else set()

    def _live_helpers(self) -> set[int]:
        """The daemon's children that are its own helpers (the guardian), not walked for a session's processes:
        only while not reaped, so the pid cannot name an orphan yet."""
        process = self.guardian.process
        return {process.pid} if process is not None and process.returncode is None else set()

    async def reaper(self) -> None:
        """Reap agents' orphans that came back to us (see reaper.py) when a child ends (SIGCHLD) or a
        session's group ends; nothing runs in between. A zombie session leader passed over while an agent
        was starting is looked at again shortly after."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._on_sigchld)
            while True:
                await self._orphans.wait()
                self._orphans = anyio.Event()
                passed = reap_orphans(*self._own_children())[1] if children_exited() else 0
                await anyio.sleep(REAP_RETRY)  # children ending together (a stop) share a round
                if passed:
                    self._orphans.set()

    async def _on_sigchld(self) -> None:
        """Each SIGCHLD wakes the reaper from the loop's signal handler itself: no task step per signal (200
        agents killed send 200)."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGCHLD, self._sigchld)
        try:
            await anyio.sleep_forever()
        finally:
            loop.remove_signal_handler(signal.SIGCHLD)

    def _sigchld(self) -> None:
        self._orphans.set()

    def _own_children(self) -> tuple[set[int], bool]:
        """Children whose exit codes someone waits for (agents, the guardian), and whether a zombie session
        leader may be reaped: not while an agent is being started, as it may be that agent, still unnamed.
        Every session's pid is kept (an adopted or attached one is no child of ours: keeping it costs
        nothing); capabilities are asked of those without a pid only (they cost microseconds each)."""
        keep: set[int] = set()
        starting = False
        for s in self.sessions.values():
            if getattr(s, "pod", None) is not None:
                continue  # a pod's pid is not this machine's, nor is a pod's start a local child's
            pid = s.pid
            if pid:
                keep.add(pid)
            elif not starting and not s.final and Capability.PROCESS_GROUP in s.capabilities:
                starting = True
        if self.guardian.pid:
            keep.add(self.guardian.pid)
        return keep, not starting

    def guard_group(self, pgid: int, alive: bool) -> None:
        """A session's process group started or ended (its containment tells the guardian)."""
        if alive:
            self._sampler_wake.set()
        else:
            self._orphans.set()

    async def sampler(self) -> None:
        """CPU, memory and process trees of live sessions; slower as sessions multiply. Each round also
        remembers the processes that left a session's group (see containment.py). With no live session
        it sleeps until one is added (nothing is scheduled while nothing is live)."""
        while True:
            live = [s for s in self.sessions.values() if not s.final]
            if not live:
                self._sampler_wake = anyio.Event()
                await self._sampler_wake.wait()
                continue
            await anyio.sleep(max(SAMPLE_SECONDS, len(live) / SAMPLES_PER_SECOND))
            await sample_round(live)

    def _session_added(self) -> None:
        self._sampler_wake.set()
