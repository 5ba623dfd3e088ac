"""The daemon: owns every session, is the only writer of the store, serves the control socket."""

from __future__ import annotations

import fcntl
import gc
import os
import signal
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import psutil

from .alerting import Alerting
from .cgroups import CgroupTree
from .containment import more_descriptors
from .contract import Supervised
from .eventloop import moderated_loop
from .guardian_link import GuardianLink
from .history import EndedSessions
from .restarts import Restartables
from .hook_agents import HookClaims
from .hook_ops import HookOperations
from .hooked import HookedSession
from .operations import ControlOperations
from .parts import ALERT_DRAIN, SHUTDOWN_CAP, SHUTDOWN_CLOSE, SHUTDOWN_FORCE_AT, SHUTDOWN_KILL_AT
from ..paths import Paths, private_dir
from .processes import ProcessWatch, Sessions, wait_children_by_pidfd
from .reaper import become_subreaper
from .records import Recorder
from .registry import RECENT_BYTES, SessionRegistry
from .routing import RecordRouting
from .server import LARGE_AT_ONCE, SocketServer, heartbeat_seconds
from .spill_bounds import SpillLedger
from .store import Store, StoreError, max_session_number_readonly
from .subscribers import QueueBudget, Subscriber
from .upkeep import Upkeep


GC_YOUNG = 100_000  # allocations between two collections of the youngest generation (Python's default: 700)


class Daemon(SocketServer, ControlOperations, HookOperations, Upkeep, ProcessWatch, SessionRegistry, RecordRouting,
             Alerting):
    """Owns every session, is the only writer of the store, serves the control socket; its jobs are the parts."""

    def __init__(self, paths: Paths, *, clock: Callable[[], float] = time.time) -> None:
        self.paths = paths
        self.clock = clock
        self._sampler_wake = anyio.Event()
        self.sessions: dict[str, Supervised] = Sessions(self._session_added)  # live, and ended until stored
        self.attached: dict[str, HookedSession] = {}  # session id -> the attached session, while in `sessions`
        self.hooked: dict[str, HookedSession] = {}  # Claude session_id -> its attached session
        self.recent = EndedSessions(RECENT_BYTES)  # the newest ended sessions' snapshots; the store has them all
        self.restartable = Restartables()  # the newest ended launched sessions' specs, for `restart`
        self.recorder = Recorder(paths.database, log=self._log, clock=clock, on_requeue_sessions=self._requeue)
        self.subscribers: list[Subscriber] = []
        self.heartbeat = heartbeat_seconds()
        self._subscribed = anyio.Event()
        self.queue_budget = QueueBudget()
        self.dirty: set[str] = set()
        self.releasing: dict[str, int] = {}  # ended session -> the mark of its final snapshot in its lane
        self.guardian = GuardianLink(self._log)
        self.cgroups: CgroupTree | None = None
        self.containment = "tracking"  # how sessions' processes are found: "cgroup" or "tracking"
        self.agent_oom: int | None = None  # the oom_score_adj agents start with (oom.py); None: the daemon's
        self.instance = ""  # "PID.START" of this daemon, the end of every agent's LOOPWARDEN_SESSION
        self.shutting_down = False
        self._stop_deadline = 0.0  # monotonic: when the daemon must be gone (SHUTDOWN_CAP after the request)
        self._cleaner_wake = anyio.Event()
        self.spill_ledger = SpillLedger()
        self.next_id = 1
        self.started_at = clock()
        self.log_errors = 0
        self._stop = anyio.Event()
        self._orphans = anyio.Event()
        self._last_publish = 0.0
        self._last_health: dict[str, Any] = {}
        self.connections = 0
        self.hook_refusals = 0
        self.hook_claims = HookClaims()  # the agent processes hooks claimed, for as long as each lives
        self._large_replies = anyio.CapacityLimiter(LARGE_AT_ONCE)
        self.subreaper = False
        self._tg: Any = None
        self._proc_cache: dict[str, dict[int, psutil.Process]] = {}  # per session, so cpu_percent has a base
        self.unserialisable = 0  # records subscribers got as a clipped copy because orjson could not write them
        self._alerts_init()

    @property
    def store(self) -> Store | None:
        return self.recorder.store

    async def serve(self, ready: Callable[[], None] | None = None) -> None:
        sock_path = self.paths.socket  # a path too long for a socket is refused before anything is made
        private_dir(self.paths.runtime)
        private_dir(self.paths.data)
        lock = self._lock()
        private_dir(sock_path.parent)
        if sock_path.exists() or sock_path.is_symlink():
            sock_path.unlink()
        lost = self._open_store()
        self._measure_spills()  # before any session can spill
        wait_children_by_pidfd()
        self._start_guardian()
        self.subreaper = become_subreaper()
        more_descriptors()
        old_umask = os.umask(0o177)
        try:
            listener = await anyio.create_unix_listener(sock_path)
        finally:
            os.umask(old_umask)
        os.chmod(sock_path, 0o600)
        self._log(f"daemon {os.getpid()} listening on {sock_path}"
                  + (f"; marked lost: {', '.join(lost)}" if lost else "")
                  + ("" if self.store else "; running WITHOUT the store (see the error above), retrying"))
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self.recorder.run, self._before_flush)
                tg.start_soon(self.recorder.checkpoints)
                tg.start_soon(self._sampler)
                tg.start_soon(self.guardian.watch)
                if self.subreaper:
                    tg.start_soon(self._reaper)
                tg.start_soon(self._spill_cleaner)
                tg.start_soon(self._pruner)
                tg.start_soon(self._settle_lost)  # sessions whose earlier guardian was still at work
                tg.start_soon(self._signals)
                tg.start_soon(self._accept, listener)
                tg.start_soon(self._heartbeats)
                self._alerts_configure()
                tg.start_soon(self.notifier.run)
                self._alert_lost(lost)
                if ready:
                    ready()
                await self._stop.wait()
                await self._shutdown_sessions()
                await self.notifier.drain(min(ALERT_DRAIN, self._stop_deadline - SHUTDOWN_CLOSE - time.monotonic()))
                await self._last_records()
                tg.cancel_scope.cancel()
        finally:
            await listener.aclose()
            try:
                sock_path.unlink()
            except OSError:
                pass
            self._publish_dirty()
            self.recorder.flush_now(deadline=self._stop_deadline or time.monotonic() + SHUTDOWN_CLOSE)
            self.recorder.close()
            if self.cgroups is not None and not self.cgroups.close():
                self._log(f"cgroup {self.cgroups.path} still holds processes; the guardian ends them")
            self.guardian.close()
            os.close(lock)

    def _open_store(self) -> list[str]:
        """Open the store, mark the sessions of earlier daemons that were still running as lost, and
        load the newest ended sessions (bounded by bytes, so start-up does not grow with history).
        Without a store (a full disk) the daemon still starts: ids continue from a read-only look."""
        self.recorder.on_open, self.recorder.after_open = self._read_history, self._took_history
        if not self.recorder.open():  # no store, or it cannot even be read and marked (a full disk)
            self.next_id = max(self.next_id, 1 + max_session_number_readonly(self.paths.database))
            return []
        lost: list[str] = self.recorder.found[0]
        self._took_history(self.recorder.found)
        return lost

    def _lock(self) -> int:
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise RuntimeError(f"a daemon is already running (pid {other or '?'}) for {self.paths.runtime}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return fd

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for _ in signals:
                self._begin_shutdown()
                self._stop.set()
                return

    def _begin_shutdown(self) -> None:
        """From now on no session starts, and the daemon must be gone within SHUTDOWN_CAP."""
        if not self.shutting_down:
            self.shutting_down = True
            self._stop_deadline = time.monotonic() + SHUTDOWN_CAP

    async def _stop_soon(self) -> None:
        await anyio.sleep(0.05)  # let the reply to stop-daemon reach its client first
        self._stop.set()

    async def _shutdown_sessions(self) -> None:
        """Stop every live session within the cap: SIGTERM, at most SHUTDOWN_KILL_AT seconds (less when
        kill_grace is shorter), SIGKILL for everything left, and each records how it ended."""
        self._begin_shutdown()
        live = [s for s in self.sessions.values() if not s.final]
        if not live:
            return
        start = self._stop_deadline - SHUTDOWN_CAP
        kill_at = start + SHUTDOWN_KILL_AT
        for session in live:
            session.deadline = kill_at  # their own waits (stop_grace, kill_grace) end there
        with anyio.move_on_after(max(0.0, start + SHUTDOWN_FORCE_AT - time.monotonic())):
            async with anyio.create_task_group() as tg:
                for session in live:
                    tg.start_soon(partial(session.kill, daemon_stopping=True))
            while any(not s.final for s in live):  # noqa: ASYNC110 - a session has no event for its end
                await anyio.sleep(0.02)
        stragglers = [s for s in live if not s.final]
        for session in stragglers:  # a session stuck past its own SIGKILL: no more waiting for anything
            session.kill_now()
        with anyio.move_on_after(max(0.0, self._stop_deadline - SHUTDOWN_CLOSE - time.monotonic())):
            while any(not s.final for s in live):  # noqa: ASYNC110 - a session has no event for its end
                await anyio.sleep(0.02)
        if stragglers:
            self._log(f"shutdown: {len(stragglers)} sessions had not ended {SHUTDOWN_FORCE_AT:g}s after the stop "
                      "request; SIGKILL for all their processes"
                      + "".join(f"; {s.spec.id} never recorded its end" for s in live if not s.final))

    async def _last_records(self) -> None:
        """Publish the final snapshots and write every pending record before the tasks are cancelled: a
        flush cancelled between taking its batch and writing it loses the batch (a session stopped by
        stop-daemon came back as lost)."""
        self._publish_dirty()
        with anyio.move_on_after(0.1):  # subscribers (an attached `run`) get the final snapshots: none, no wait
            while any(s.cut_reason is None and (s.head is not None or s.queue or s.sending)  # noqa: ASYNC110
                      for s in self.subscribers):
                await anyio.sleep(0.005)
        with anyio.move_on_after(max(0.0, self._stop_deadline - SHUTDOWN_CLOSE - time.monotonic())):
            await self._flush()  # waits for a flush under way, then writes the rest; no await follows it


def tune_collector() -> None:
    """The cyclic garbage collector, tuned for a daemon that allocates some ten containers per event and frees
    nearly all of them at once by reference counting: what exists by now (modules, classes, the
    daemon's parts) is frozen out of its scans for good, and the youngest generation is collected every
    GC_YOUNG allocations instead of 700. A 50-session flood spent ~10 % of the daemon's CPU collecting."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])


def run_daemon(paths: Paths) -> int:
    """`loopwarden serve`: run in the foreground until SIGTERM/SIGINT or stop-daemon."""
    try:
        daemon = Daemon(paths)
        tune_collector()
        anyio.run(daemon.serve, backend_options={"loop_factory": moderated_loop})
    except RuntimeError as exc:
        sys.stderr.write(f"loopwarden: error: {exc}\n")
        return 1
    except (OSError, StoreError) as exc:  # a bad runtime directory, a socket path too long, a bad database
        filename = getattr(exc, "filename", None)
        where = f" ({filename})" if filename else ""
        sys.stderr.write(f"loopwarden: error: {getattr(exc, 'strerror', None) or exc}{where}\n")
        return 1
    return 0
