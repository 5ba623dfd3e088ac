"""The daemon: owns every session, is the only writer of the store, serves the control socket.

It is made of parts, one object per job, each given the others it uses: the session registry (registry.py),
record routing (routing.py) to the recorder (records.py) and the subscribers (broadcast.py), the audit log
(audit.py), the agents' processes (processes.py), disk upkeep (upkeep.py), alerts (alerting.py), the
operations clients ask for (ops_*.py, hook_ops.py) and the socket server that dispatches to them (server.py).
This module puts them together and owns the lifecycle: start, serve, stop.
"""

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
from anyio.abc import TaskGroup

from ..paths import Paths, private_dir
from .alerting import Alerting
from .audit import AuditLog
from .broadcast import Broadcaster, heartbeat_seconds
from .client import SUCCEED_ENV
from .containment import more_descriptors
from .daemon_health import DaemonHealth
from .daemon_log import DaemonLog
from .earlier import EarlierSessions
from .eventloop import moderated_loop
from .hook_ops import HookOperations
from .keeping import Keeping
from .launcher import Launcher
from .lifecycle import (ALERT_DRAIN, SHUTDOWN_CAP, SHUTDOWN_CLOSE, SHUTDOWN_FORCE_AT, SHUTDOWN_KILL_AT, Shutdown,
                        Tasks)
from .ops_daemon import DaemonOperations
from .after_reboot import ContinueAfterReboot
from .continuing import ContinueOperations
from .takeover import TakeoverOperations
from .ops_launch import LaunchOperations
from .ops_read import ReadOperations
from .ops_session import SessionOperations
from .ops_tags import TagOperations
from .ops_worktree import WorktreeOperations
from .processes import ProcessListing, ProcessWatch, wait_children_by_pidfd
from .reaper import become_subreaper
from .records import Recorder
from .registry import SessionRegistry
from .routing import Router
from .server import SocketServer
from .session_runs import SessionStarter
from .spending import Spending
from .spill_bounds import SpillLedger
from .store import StoreError
from .upkeep import Upkeep
from .pods.left_behind import delete_left_pods
from .pods.take_up import PodTakeUp

__all__ = ["SHUTDOWN_CAP", "Daemon", "run_daemon"]

SUCCEED_WAIT = 30.0  # seconds a daemon started by restart-daemon waits for the one it replaces to exit
GC_YOUNG = 100_000  # allocations between two collections of the youngest generation (Python's default: 700)


class Daemon:
    """Owns every session, is the only writer of the store, serves the control socket; its jobs are its parts."""

    def __init__(self, paths: Paths, *, clock: Callable[[], float] = time.time) -> None:
        self.paths = paths
        self.log = log = DaemonLog()
        self.shutdown = Shutdown()
        self.tasks = tasks = Tasks()
        self.recorder = recorder = Recorder(paths.database, log=log, clock=clock)
        self.registry = registry = SessionRegistry(recorder)
        self.watch = watch = ProcessWatch(paths, registry.sessions, log=log)
        self.broadcaster = broadcaster = Broadcaster(log, heartbeat=heartbeat_seconds())
        self.audit = audit = AuditLog(recorder, broadcaster, registry, clock=clock)
        self.alerting = alerting = Alerting(paths, registry, audit, log=log, clock=clock)
        self.spill_ledger = spill_ledger = SpillLedger()
        self.health = health = DaemonHealth(recorder, log, spill_ledger, alerting)
        self.router = router = Router(recorder, registry, broadcaster, audit, alerting, health, clock=clock)
        self.spending = spending = Spending(paths, registry, log=log, clock=clock)
        router.spent = spending.spent
        health.spending = spending.view
        self.upkeep = upkeep = Upkeep(paths, registry, spill_ledger, log=log, clock=clock)
        self.earlier = EarlierSessions(registry, broadcaster, tasks, paths, instance=lambda: watch.instance,
                                       log=log, clock=clock)
        starter = SessionStarter(registry, router, tasks, log=log, clock=clock)
        starter.told = spending.tell  # a session starts knowing the daemon's budgets reached
        self.keeping = keeping = Keeping(paths, registry, recorder, watch, log=log)
        self.launcher = launcher = Launcher(paths, registry, starter, router, recorder, watch, spill_ledger, upkeep,
                                            keeping, clock=clock)
        self.pods_left = PodTakeUp(keeping, launcher.take_up_in_pod, self._lost_in_pod, log,
                                   taking=self.earlier.taking_up, stopping=lambda: self.shutdown.begun,
                                   handover=lambda: self.shutdown.handover)
        self.earlier.on_in_pods = lambda left: self.pods_left.run(recorder.store, left)  # found by a later open
        self.hooks = hooks = HookOperations(paths, registry, starter, recorder, audit, health, tasks,
                                            sink=router.sink, helpers=watch.helpers, clock=clock)
        continues = ContinueOperations(paths, registry, launcher, audit, self.shutdown)
        self.after_reboot = ContinueAfterReboot(paths, registry, continues, log=log)
        listing = ProcessListing(registry.sessions)
        registry.on_release(listing.forget)
        reading = ReadOperations(registry, recorder, listing)
        self.server = SocketServer(
            [reading,
             LaunchOperations(paths, registry, launcher, starter, audit, self.shutdown, tasks),
             continues, TakeoverOperations(registry, audit, tasks),
             SessionOperations(registry, audit, hooks, tasks, spending),
             DaemonOperations(paths, registry, health, broadcaster, watch, upkeep, audit, self.shutdown, tasks,
                              keeping, clock=clock),
             hooks, alerting, WorktreeOperations(registry, audit, reading.calls_diff),
             TagOperations(registry, audit, router.mark)],
            registry, broadcaster, health, audit, hooks.claims, attached=hooks.live_ids, helpers=watch.helpers,
            log=log)

    async def serve(self, ready: Callable[[], None] | None = None) -> None:
        sock_path = self.paths.socket  # a path too long for a socket is refused before anything is made
        private_dir(self.paths.runtime)
        private_dir(self.paths.data)
        lock = await self._lock_when_free() if os.environ.get(SUCCEED_ENV) else self._lock()
        private_dir(sock_path.parent)
        if sock_path.exists() or sock_path.is_symlink():
            sock_path.unlink()
        await self.keeping.open()  # before the store marks what earlier daemons left running as lost
        self.earlier.kept = self.keeping.kept_ids
        lost = self.earlier.open()
        self.spending.configure()
        self.spending.rebuild(self.recorder.store)  # before any session is taken up or started
        self.upkeep.measure_spills()  # before any session can spill
        wait_children_by_pidfd()
        self.watch.start_guardian()
        self.watch.subreaper = become_subreaper()
        more_descriptors()
        old_umask = os.umask(0o177)
        try:
            listener = await anyio.create_unix_listener(sock_path)
        finally:
            os.umask(old_umask)
        os.chmod(sock_path, 0o600)
        self.log(f"daemon {os.getpid()} listening on {sock_path}"
                 + (f"; marked lost: {', '.join(lost)}" if lost else "")
                 + ("" if self.recorder.store else "; running WITHOUT the store (see the error above), retrying"))
        try:
            async with anyio.create_task_group() as tg:
                self.tasks.group = tg
                self._start_work(tg, listener)
                tg.start_soon(self.keeping.take_up_all, self.recorder.store, self.launcher.take_up)
                tg.start_soon(self.pods_left.run, self.recorder.store, self.earlier.left_in_pods())
                self.alerting.configure()
                tg.start_soon(self.alerting.notifier.run)
                tg.start_soon(self.spending.days_turn)
                self.alerting.lost(lost)
                tg.start_soon(delete_left_pods, self.recorder.store, lost, self.log)
                tg.start_soon(self.after_reboot.run, lost)  # sessions.continue_after_reboot
                if ready:
                    ready()
                await self.shutdown.requested.wait()
                await self._shutdown_sessions()
                if not self.shutdown.handover:
                    await self.keeping.shutdown()
                await self.alerting.notifier.drain(
                    min(ALERT_DRAIN, self.shutdown.deadline - SHUTDOWN_CLOSE - time.monotonic()))
                await self._last_records()
                if self.shutdown.handover:
                    await self._hand_over()
                tg.cancel_scope.cancel()
        finally:
            await listener.aclose()
            try:
                sock_path.unlink()
            except OSError:
                pass
            if self.shutdown.handover:  # (its sessions' tasks are over: nothing reads the links' ends)
                await self.keeping.close_pods()
            self._close(lock)

    def _start_work(self, tg: TaskGroup, listener: Any) -> None:
        """The daemon's standing tasks: the flusher, the sampler, the guardian's watch, the reaper, upkeep, the
        lost sessions still to settle, signals, the socket and the subscriptions' heartbeat."""
        tg.start_soon(self.recorder.run, self.router.before_flush)
        tg.start_soon(self.recorder.checkpoints)
        tg.start_soon(self.watch.sampler)
        tg.start_soon(self.watch.guardian.watch)
        if self.watch.subreaper:
            tg.start_soon(self.watch.reaper)
        tg.start_soon(self.upkeep.clean_spills)
        tg.start_soon(self.upkeep.pruner)
        tg.start_soon(self.earlier.settle)  # sessions whose earlier guardian was still at work
        tg.start_soon(self._signals)
        tg.start_soon(self.server.accept, listener)
        tg.start_soon(self.broadcaster.heartbeats)

    async def _lost_in_pod(self, sid: str, why: str) -> None:
        """A session an earlier daemon left in a pod, not taken up: lost (and said so), its pod deleted."""
        if await self.earlier.lose(sid, why):
            self.alerting.lost([sid])
            await delete_left_pods(self.recorder.store, [sid], self.log)
            await self.after_reboot.run([sid])  # sessions.continue_after_reboot

    async def _hand_over(self) -> None:
        """restart-daemon: the kept sessions let go of their agents (the keeper holds them for the next daemon,
        what was read and not stored is sent to it again), and the keeper is told to wait for it."""
        held = self.keeping.let_go()
        await self.keeping.handover()
        self.log(f"handing over: {held} kept sessions wait for the next daemon")

    def _close(self, lock: int) -> None:
        """What is left once the tasks are done: the last records written, the store, cgroups, guardian, lock."""
        self.router.publish_dirty()
        self.recorder.flush_now(deadline=self.shutdown.deadline or time.monotonic() + SHUTDOWN_CLOSE)
        self.recorder.close()
        cgroups = self.watch.cgroups
        if cgroups is not None and not cgroups.close():
            self.log(f"cgroup {cgroups.path} still holds processes; the guardian ends them")
        self.watch.guardian.close()
        os.close(lock)

    async def _lock_when_free(self) -> int:
        """restart-daemon: this daemon replaces one that is stopping; its lock is taken as soon as it is free."""
        deadline = time.monotonic() + SUCCEED_WAIT
        while True:
            try:
                return self._lock()
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                await anyio.sleep(0.005)

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
                self.shutdown.request()
                return

    async def _shutdown_sessions(self) -> None:
        """Stop every live session within the cap: SIGTERM, at most SHUTDOWN_KILL_AT seconds (less when
        kill_grace is shorter), SIGKILL for everything left, and each records how it ended."""
        self.shutdown.begin()
        kept = self.keeping.handed_over if self.shutdown.handover else set()
        live = [s for sid, s in self.registry.sessions.items() if not s.final and sid not in kept]
        if not live:
            return
        deadline = self.shutdown.deadline
        start = deadline - SHUTDOWN_CAP
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
        with anyio.move_on_after(max(0.0, deadline - SHUTDOWN_CLOSE - time.monotonic())):
            while any(not s.final for s in live):  # noqa: ASYNC110 - a session has no event for its end
                await anyio.sleep(0.02)
        if stragglers:
            self.log(f"shutdown: {len(stragglers)} sessions had not ended {SHUTDOWN_FORCE_AT:g}s after the stop "
                      "request; SIGKILL for all their processes"
                      + "".join(f"; {s.spec.id} never recorded its end" for s in live if not s.final))

    async def _last_records(self) -> None:
        """Publish the final snapshots and write every pending record before the tasks are cancelled: a
        flush cancelled between taking its batch and writing it loses the batch (a session stopped by
        stop-daemon came back as lost)."""
        self.router.publish_dirty()
        with anyio.move_on_after(0.1):  # subscribers (an attached `run`) get the final snapshots: none, no wait
            while self.broadcaster.busy():  # noqa: ASYNC110 - a subscriber has no event for its queue's end
                await anyio.sleep(0.005)
        with anyio.move_on_after(max(0.0, self.shutdown.deadline - SHUTDOWN_CLOSE - time.monotonic())):
            await self.recorder.flush()  # waits for a flush under way, then writes the rest; no await follows it


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
