"""The daemon: owns every session, is the only writer of the store, serves the control socket."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
import psutil
from anyio.abc import SocketAttribute, SocketStream

from ..supervisor.config import ConfigError, load_config
from ..supervisor.gates import GateError
from ..supervisor.health import RESETTABLE
from .cgroups import CgroupTree
from .containment import Containment, daemon_instance
from .guardian_link import GuardianLink
from .paths import Paths, private_dir
from .principal import (Principal, agent_environment, claimed_by, classify, claude_code_tool, descends_from,
                        hook_agent)
from .procfs import ProcTable, ancestry
from .reaper import become_subreaper, reap_orphans
from .requests import BadRequest, adopt_request, run_request
from .commands import default_name, missing_program
from .session import LiveSession, SessionSpec, minimal_env, tree_pids
from . import spill_cleaner
from ..supervisor.verdicts import FINAL_STATES, final_exit_code
from .adopted import AdoptedSession
from ..supervisor.bounds import MAX_REQUEST_BYTES
from .hooked import HookedSession
from .codex_hooked import hooked_kind
from .records import AUDIT, Recorder
from .spill import Spiller
from .history import EndedSessions
from .store import HISTORY_TABLES, Store, StoreError, max_session_number_readonly
from .subscribers import QueueBudget, Subscriber, encode
from ..supervisor.visible import visible

PROTOCOL = 1
_BLANKS = re.compile(rb"[ \t\r\n]+")
MAX_REQUEST = MAX_REQUEST_BYTES
PUBLISH_SECONDS = 0.25
SAMPLE_SECONDS = 0.5  # 2 Hz with few sessions
SAMPLES_PER_SECOND = 20  # ... and at most this many session samples a second
RECENT_BYTES = 4 << 20  # snapshots of ended sessions kept in memory (the store has every one)
HOOKED_ENDED_KEPT = 200  # terminated hook sessions remembered, so later hook calls still stop Claude
LIST_PAGE = 1000  # sessions in one page of older history (`list` with `before`)
LIST_BYTES = 8 << 20  # ... and at most this many bytes of their snapshots
LOGS_LIMIT = 10_000  # rows of each table in one `logs` page
LOGS_BYTES = 4 << 20  # text in one `logs` page: a reply (and the daemon) never holds more per request
SPILLS_SHOWN = 200  # the newest spill files listed with a `logs` page
INJECT_CHARS = 100_000  # operator text sent to an agent in one `inject`
MAX_CONNECTIONS = 256  # open at once; each holds at most MAX_REQUEST of unread request
REPLY_SECONDS = 30.0  # a client that does not take its reply within this long is disconnected
LARGE_REPLIES = frozenset({"logs", "list", "actions", "gates"})  # replies of up to a few MiB...
LARGE_AT_ONCE = 4  # ... of which this many are built at a time
REFUSALS_AUDITED = 10  # refused operator actions audited on one connection, which is then closed
CURSOR = {"events": "after", "verdicts": "verdicts_after", "actions": "actions_after"}
SHUTDOWN_CAP = 10.0  # seconds from a stop request to the daemon's exit, whatever limits.kill_grace says
SHUTDOWN_KILL_AT = 7.0  # ... SIGTERM's grace ends here at the latest: sessions SIGKILL what is left
SHUTDOWN_FORCE_AT = 8.5  # ... the daemon SIGKILLs what sessions have not ended by now (a stuck session)
SHUTDOWN_CLOSE = 1.0  # ... and keeps this long for the last records, the store and the cgroups


@dataclass
class Peer:
    """One connection's client: who it is, and how many operator actions it was refused."""

    principal: Principal
    refused: int = 0


class RequestError(Exception):
    """A request the daemon refuses; the message is sent back as one line."""


def peer_uid(stream: SocketStream) -> tuple[int, int]:
    """(uid, pid) of the process on the other end of a unix socket (SO_PEERCRED)."""
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return uid, pid


class Daemon:
    def __init__(self, paths: Paths, *, clock: Callable[[], float] = time.time) -> None:
        self.paths = paths
        self.clock = clock
        self.sessions: dict[str, LiveSession | AdoptedSession | HookedSession] = {}  # live, and ended until stored
        self.hooked: dict[str, HookedSession] = {}  # Claude session_id -> its attached session
        self.recent = EndedSessions(RECENT_BYTES)  # the newest ended sessions' snapshots; the store has them all
        self.recorder = Recorder(paths.database, log=self._log, clock=clock, on_requeue_sessions=self._requeue)
        self.subscribers: list[Subscriber] = []
        self.queue_budget = QueueBudget()
        self.dirty: set[str] = set()
        self.releasing: dict[str, int] = {}  # ended session -> the mark of its final snapshot in its lane
        self.guardian = GuardianLink(self._log)
        self.cgroups: CgroupTree | None = None
        self.containment = "tracking"  # how sessions' processes are found: "cgroup" or "tracking"
        self.instance = ""  # "PID.START" of this daemon, the end of every agent's LOOPWARDEN_SESSION
        self.shutting_down = False
        self._stop_deadline = 0.0  # monotonic: when the daemon must be gone (SHUTDOWN_CAP after the request)
        self._cleaner_wake = anyio.Event()
        self.next_id = 1
        self.started_at = clock()
        self.log_errors = 0
        self._stop = anyio.Event()
        self._orphans = anyio.Event()
        self._last_publish = 0.0
        self._last_health: dict[str, Any] = {}
        self.connections = 0
        self._large_replies = anyio.CapacityLimiter(LARGE_AT_ONCE)
        self.subreaper = False
        self._tg: Any = None
        self._proc_cache: dict[str, dict[int, psutil.Process]] = {}  # per session, so cpu_percent has a base
        self.unserialisable = 0  # records subscribers got as a clipped copy because orjson could not write them

    @property
    def store(self) -> Store | None:
        return self.recorder.store

    # ---- lifecycle ------------------------------------------------------
    async def serve(self, ready: Callable[[], None] | None = None) -> None:
        sock_path = self.paths.socket  # a path too long for a socket is refused before anything is made
        private_dir(self.paths.runtime)
        private_dir(self.paths.data)
        lock = self._lock()
        private_dir(sock_path.parent)
        if sock_path.exists() or sock_path.is_symlink():
            sock_path.unlink()
        lost = self._open_store()
        self._start_guardian()
        self.subreaper = become_subreaper()
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
                tg.start_soon(self._signals)
                tg.start_soon(self._accept, listener)
                if ready:
                    ready()
                await self._stop.wait()
                await self._shutdown_sessions()
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

    def _read_history(self, store: Store) -> tuple[list[str], list[dict[str, Any]], int]:
        """When the store has just been opened (in the opening thread): mark the sessions earlier daemons
        left running as lost, and read the newest ended ones and the highest id. Raises StoreError."""
        live = set(self.sessions)  # a copy taken at once: the event loop may add to it meanwhile
        lost = store.mark_lost(self.clock(), keep=live)
        return lost, store.recent_sessions(RECENT_BYTES), store.max_session_number()

    def _took_history(self, found: tuple[list[str], list[dict[str, Any]], int]) -> None:
        """What `_read_history` found, taken in on the event loop."""
        _lost, rows, highest = found
        for row in rows:
            if row["id"] not in self.sessions:
                self.recent.add(row["id"], _row_snapshot(row))
        self.next_id = max(self.next_id, 1 + highest)

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

    def _start_guardian(self) -> None:
        """Find how sessions' processes will be contained, start the guardian and tell it so."""
        self.instance = daemon_instance()
        self.cgroups, how = CgroupTree.create()
        self.containment = "cgroup" if self.cgroups else "tracking"
        self._log(f"process containment: {how}" if self.cgroups else
                  f"process containment: process groups, /proc tracking and marks ({how})")
        self.guardian.start()
        self.guardian.protect("m", f"@{self.instance}")  # every agent's LOOPWARDEN_SESSION ends with it
        if self.cgroups is not None:
            self.guardian.protect("c", str(self.cgroups.path))

    def _containment(self, sid: str) -> Containment:
        cgroup = self.cgroups.session(sid) if self.cgroups is not None else None
        return Containment(sid, mark=f"{sid}@{self.instance}", cgroup=cgroup, guard=self.guardian)

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
            if isinstance(session, (LiveSession, AdoptedSession)):
                session.deadline = kill_at  # their own waits (stop_grace, kill_grace) end there
        with anyio.move_on_after(max(0.0, start + SHUTDOWN_FORCE_AT - time.monotonic())):
            async with anyio.create_task_group() as tg:
                for session in live:
                    tg.start_soon(session.kill, "the daemon is stopping")
            while any(not s.final for s in live):  # noqa: ASYNC110 - a session has no event for its end
                await anyio.sleep(0.02)
        stragglers = [s for s in live if not s.final]
        for session in stragglers:  # a session stuck past its own SIGKILL: no more waiting for anything
            if isinstance(session, (LiveSession, AdoptedSession)):
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
        await anyio.sleep(0.1)  # subscribers (an attached `run`) get the final snapshots
        with anyio.move_on_after(max(0.0, self._stop_deadline - SHUTDOWN_CLOSE - time.monotonic())):
            await self._flush()  # waits for a flush under way, then writes the rest; no await follows it

    def _log(self, text: str) -> None:
        """One line in the daemon's log, agent text in it made visible (it cannot forge lines or drive a
        terminal); a failed write (a full disk) is counted, never raised."""
        try:
            os.write(2, f"{time.strftime('%Y-%m-%d %H:%M:%S')} {visible(text)}\n".encode("utf-8", "replace"))
        except OSError:
            self.log_errors += 1

    # ---- records: store and broadcast -------------------------------------
    def sink(self, kind: str, session_id: str, data: dict[str, Any], size: int = 0) -> None:
        """Every record a session produces: queued for the store, broadcast to subscribers.
        `size` is the bytes the record came from (an event's line), for the store's byte budget."""
        if kind == "session":
            self._mark(session_id)
            return
        if kind in ("event", "log"):
            if kind == "log":
                row = {"session_id": session_id, "seq": None, "ts": data.get("ts"), "kind": "log", "data": data}
            else:
                row = {"session_id": session_id, "seq": data.get("seq"), "ts": self.clock(),  # when it was seen
                       "kind": data.get("type"), "data": data}
            if not self.recorder.add("events", session_id, row, size or _text_size(data)):
                self._mark(session_id)  # its dropped_events count moved
                return
            self._broadcast(kind, session_id, data, is_event=True)
            return
        if kind == "verdict":
            self.recorder.add("verdicts", session_id, {"session_id": session_id, **_verdict_row(data)})
        elif kind == "gate":
            self.recorder.add("gates", session_id, {"session_id": session_id, "gate_id": data["id"],
                                                    **{k: v for k, v in data.items() if k != "id"}})
        elif kind == "spill":
            self.recorder.add("spills", session_id, {"session_id": session_id, **data})
        elif kind == "action":
            self.recorder.add("actions", AUDIT, {"session_id": session_id, **data}, _text_size(data))
        self._broadcast(kind, session_id, data, is_event=False)

    def _mark(self, session_id: str) -> None:
        """A session changed: publish its snapshot on the next round."""
        self.dirty.add(session_id)
        self.recorder.poke()

    def _requeue(self, session_ids: list[str]) -> None:
        """Snapshots that could not be written are published (and written) again on the next round."""
        for sid in session_ids:
            if sid in self.sessions:
                self._mark(sid)

    def _broadcast(self, kind: str, session_id: str, data: dict[str, Any], *, is_event: bool) -> None:
        message: bytes | None = None
        for sub in self.subscribers:
            if sub.wants(session_id, is_event):
                if message is None:
                    message, trouble = encode(kind, session_id, data)
                    if trouble:
                        self._unserialisable(kind, session_id, trouble)
                sub.offer(message)

    def _unserialisable(self, kind: str, session_id: str, trouble: str) -> None:
        """Count (and now and then log) a record that went out clipped; a session never hears of it."""
        self.unserialisable += 1
        if self.unserialisable == 1 or self.unserialisable % 1000 == 0:
            self._log(f"a {kind} record of session {session_id} could not be serialised ({trouble}); "
                      f"subscribers got a clipped copy ({self.unserialisable} so far)")

    def _before_flush(self) -> None:
        """Each flusher round: publish changed snapshots (at most every PUBLISH_SECONDS), then release
        the ended sessions whose final snapshot is stored."""
        now = time.monotonic()
        if self.dirty and now - self._last_publish >= PUBLISH_SECONDS:
            self._last_publish = now
            self._publish_dirty()
        elif self.dirty:
            self.recorder.poke()  # publish on a later round, at most PUBLISH_SECONDS apart
        self._release_ended()
        health = self._health()
        if health != self._last_health:  # what could not be written changed: every console says so
            self._last_health = health
            message, _ = encode("daemon", "", health)
            for sub in self.subscribers:
                sub.offer(message)

    def _health(self) -> dict[str, Any]:
        """What the daemon could not write or keep since it started (all zero on a good day)."""
        return {"store": self.recorder.health.to_dict(), "dropped_events": sum(self.recorder.dropped.values()),
                "log_errors": self.log_errors}

    def _publish_dirty(self) -> None:
        for session_id in list(self.dirty):
            session = self.sessions.get(session_id)
            if session is None:
                continue
            snap = self._live_snapshot(session)
            self.recorder.add("sessions", session_id, _session_row(snap))
            self._broadcast("session", session_id, snap, is_event=False)
            if session.final:
                self.releasing[session_id] = self.recorder.mark(session_id)
        self.dirty.clear()

    def _release_ended(self) -> None:
        """Ended sessions leave memory once their final snapshot is stored; their history stays in the
        store and their snapshot in `recent`, so memory does not grow with the sessions run."""
        for sid, mark in list(self.releasing.items()):
            written = self.recorder.written(sid, mark)
            if written is None or sid in self.dirty:
                continue
            del self.releasing[sid]
            if not written:
                self._mark(sid)  # the write failed: try again with the next round
                continue
            session = self.sessions.pop(sid, None)
            self._proc_cache.pop(sid, None)
            self.recorder.forget(sid)
            if session is not None:
                self.recent.add(sid, self._live_snapshot(session))
                if (isinstance(session, HookedSession) and session.state != "terminated"
                        and self.hooked.get(session.hook_key) is session):
                    del self.hooked[session.hook_key]

    async def _flush(self) -> None:
        """Write what is pending, so a reader sees every record before it."""
        await self.recorder.flush()

    async def _durably(self, mark: int) -> bool:
        return await self.recorder.durable(AUDIT, mark)

    async def _spill_cleaner(self) -> None:
        """Remove spill files past their retention in every spill directory in use, each session's with
        the session's own retention: at start, then when the next file expires (see spill_cleaner.interval)."""
        while True:
            config = load_config(env={}).spill
            default_dir = config.dir or str(self.paths.spill)
            uses = await anyio.to_thread.run_sync(self._spill_uses, default_dir, config.retention)
            plans = spill_cleaner.plan(default_dir, config.retention, uses)
            removed = await anyio.to_thread.run_sync(spill_cleaner.clean, plans, self.clock())
            if removed:
                self._log(f"removed {removed} spill files past their retention from {len(plans)} directories")
            live = [s.spiller.retention for s in self.sessions.values()
                    if isinstance(s, LiveSession) and s.spiller is not None and not s.final]
            wait = await anyio.to_thread.run_sync(spill_cleaner.interval, plans, live, self.clock())
            self._cleaner_wake = anyio.Event()
            with anyio.move_on_after(wait):
                await self._cleaner_wake.wait()  # a new session may bring a shorter retention

    def _spill_uses(self, default_dir: str, default_retention: float) -> list[spill_cleaner.SessionSpill]:
        """Where each session, of this daemon or an earlier one, spills, and its retention (a worker thread)."""
        uses: dict[str, spill_cleaner.SessionSpill] = {}
        store = self.store
        if store is not None:
            try:
                for sid, directory, retention in store.spill_settings(default_dir, default_retention):
                    uses[sid] = spill_cleaner.SessionSpill(sid, directory, retention)
            except StoreError as exc:
                self._log(f"spill cleaner: cannot read the sessions' spill settings ({exc})")
        for sid, session in list(self.sessions.items()):
            spiller = getattr(session, "spiller", None)
            if isinstance(spiller, Spiller):
                uses[sid] = spill_cleaner.SessionSpill(sid, spiller.directory, spiller.retention)
        return list(uses.values())

    async def _reaper(self) -> None:
        """Reap agents' orphans that came back to us (see reaper.py)."""
        while True:
            await self._orphans.wait()
            self._orphans = anyio.Event()
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                reap_orphans(*self._own_children())
                await anyio.sleep(0.01)
                if not any(s.stopping and not s.final for s in self.sessions.values()):
                    reap_orphans(*self._own_children())
                    break

    def _own_children(self) -> tuple[set[int], bool]:
        """Children whose exit codes someone waits for (agents, the guardian), and whether a zombie session
        leader may be reaped: not while an agent is being started, as it may be that agent, still unnamed."""
        keep = {s.pid for s in self.sessions.values() if isinstance(s, LiveSession) and s.pid}
        if self.guardian.pid:
            keep.add(self.guardian.pid)
        starting = any(isinstance(s, LiveSession) and s.pid is None and not s.final for s in self.sessions.values())
        return keep, not starting

    def _guard_group(self, pgid: int, alive: bool) -> None:
        """A session's process group started or ended (its containment tells the guardian)."""
        if not alive:
            self._orphans.set()

    async def _sampler(self) -> None:
        """CPU, memory and process trees of live sessions; slower as sessions multiply. Each round also
        remembers the processes that left a session's group (see containment.py)."""
        while True:
            live = [s for s in self.sessions.values() if not s.final]
            await anyio.sleep(max(SAMPLE_SECONDS, len(live) / SAMPLES_PER_SECOND))
            if not live:
                continue
            table = await anyio.to_thread.run_sync(ProcTable.scan)
            for session in live:
                if not session.final:
                    if isinstance(session, LiveSession):
                        session.containment.observe(table)
                    await session.sample(table.children)  # marks the session dirty only when numbers moved

    # ---- the socket -------------------------------------------------------
    async def _accept(self, listener: Any) -> None:
        async def handle(stream: SocketStream) -> None:
            self.connections += 1
            try:
                if self.connections > MAX_CONNECTIONS:
                    await _send(stream, _reply(None, error=f"refused: {MAX_CONNECTIONS} connections are open "
                                                           "already; close some and try again"))
                    return
                await self._connection(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError, TimeoutError):
                pass
            except Exception as exc:  # noqa: BLE001 - one client's trouble must never end the daemon
                if not _only_hangups(exc):
                    self._log(f"connection failed: {type(exc).__name__}: {exc}")
            finally:
                self.connections -= 1
                with anyio.CancelScope(shield=True):
                    await stream.aclose()

        while True:
            try:
                await listener.serve(handle)
            except Exception as exc:  # noqa: BLE001 - e.g. EMFILE: too many open files
                self._log(f"accepting connections failed ({type(exc).__name__}: {exc}); retrying in 1 s")
                await anyio.sleep(1.0)

    async def _connection(self, stream: SocketStream) -> None:
        uid, pid = peer_uid(stream)
        if uid != os.getuid():
            await _send(stream, _reply(None, error=f"refused: uid {uid} is not the owner of this daemon "
                                                  f"(uid {os.getuid()})"))
            return
        peer = Peer(self._classify(pid, uid))
        buffer = b""
        while True:
            try:
                chunk = await stream.receive(1 << 16)
            except anyio.EndOfStream:
                return
            buffer += chunk
            start = 0  # scan by index: splitting the buffer per line is quadratic in a run of newlines
            while (end := buffer.find(b"\n", start)) >= 0:
                blank = _BLANKS.match(buffer, start)
                if blank is not None and blank.end() > end:  # blank lines: skip the whole run at once
                    start = buffer.rfind(b"\n", start, blank.end()) + 1
                    continue
                if end - start > MAX_REQUEST:
                    await _send(stream, _reply(None, error=f"request longer than {MAX_REQUEST:,} bytes; closing"))
                    return
                line = buffer[start:end]
                start = end + 1
                if await self._request(stream, line, peer):
                    return
            buffer = buffer[start:]
            if len(buffer) > MAX_REQUEST:
                await _send(stream, _reply(None, error=f"request longer than {MAX_REQUEST:,} bytes; closing"))
                return

    def _classify(self, pid: int, uid: int) -> Principal:
        """Who connected, and which live session (if any) it runs inside; see principal.py."""
        claims = [claim for session in self.sessions.values() if not session.final for claim in session.claims()]
        guardian_pid = self.guardian.pid
        helpers = {guardian_pid} if guardian_pid is not None else set()
        attached = [s.spec.id for s in self.hooked.values() if not s.final]
        return classify(pid, uid, [claimed_by(claims), descends_from(os.getpid(), helpers), claude_code_tool(attached)])

    async def _request(self, stream: SocketStream, line: bytes, peer: Peer) -> bool:
        """Answer one request; True when the connection is now a subscription (or must close)."""
        try:
            request = orjson.loads(line)
        except orjson.JSONDecodeError:
            await _send(stream, _reply(None, error="request is not valid JSON"))
            return False
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            await _send(stream, _reply(None, error="request must be an object with an 'op'"))
            return False
        rid = request.get("id")
        op: str = request["op"]
        who = peer.principal.acting_as(request.get("client"), request.get("agent_session"))
        if op == "subscribe":
            await self._subscribe(stream, request, rid)
            return True
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            await _send(stream, _reply(rid, error=f"unknown op {op[:40]!r}"))
            return False
        refusal = who.refusal(op)
        if refusal:  # a supervised agent acting as the operator: recorded, and nothing else happens
            peer.refused += 1
            if peer.refused <= REFUSALS_AUDITED:  # a flood of attempts on one connection fills no audit log
                self._audit(who, await self._target_session(request), "stop-daemon" if op == "shutdown" else op,
                            _attempted_target(request), _note(request) or _note({"note": request.get("text")}),
                            refusal)
            await _send(stream, _reply(rid, error=refusal))
            return peer.refused >= REFUSALS_AUDITED  # ... and the connection is closed after them
        try:
            if op in LARGE_REPLIES:  # a few at a time: what one such reply holds is bounded, so is their sum
                async with self._large_replies:
                    await _send(stream, _reply(rid, result=await handler(request, who=who)))
                return False
            result = await handler(request, who=who)
        except RequestError as exc:
            await _send(stream, _reply(rid, error=str(exc)))
            return False
        except StoreError as exc:
            await _send(stream, _reply(rid, error=f"the store could not be read: {exc}"))
            return False
        except Exception as exc:  # noqa: BLE001 - a bug must not take the daemon down
            self._log(f"error in {op}: {type(exc).__name__}: {exc}")
            await _send(stream, _reply(rid, error=f"internal error in {op}: {type(exc).__name__}: {exc}"))
            return False
        await _send(stream, _reply(rid, result=result))
        return op == "shutdown"

    async def _subscribe(self, stream: SocketStream, request: dict[str, Any], rid: Any) -> None:
        sessions = request.get("sessions")
        try:
            wanted = {await self._resolve(s) for s in sessions} if isinstance(sessions, list) else None
        except RequestError as exc:
            await _send(stream, _reply(rid, error=str(exc)))
            return
        sub = Subscriber(wanted, bool(request.get("events", False)), self.queue_budget)
        snapshot = [self._snapshot(s) for s in self._all_sessions(wanted)]
        sub.first(_reply(rid, result={"sessions": snapshot, "daemon": self._health()}))  # sent by the pump, so a
        self.subscribers.append(sub)  # reader that never reads it is cut off too; nothing falls in between
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_client, stream, tg.cancel_scope)
                await sub.pump(stream)
                tg.cancel_scope.cancel()
        finally:
            self.subscribers.remove(sub)
            sub.release()
            if sub.cut_reason:
                self._log(f"subscriber {sub.cut_reason}")

    # ---- helpers ------------------------------------------------------------
    async def _resolve(self, ref: Any) -> str:
        """A session id from an id or a name (the newest of that name): memory first, then the store."""
        if not isinstance(ref, str) or not ref:
            raise RequestError("a session id or name is required")
        if ref in self.sessions or ref in self.recent:
            return ref
        named = [s.spec.id for s in self.sessions.values() if s.spec.name == ref]
        if named:
            return named[-1]
        found = self.recent.by_name(ref)
        store = self.store
        if found is None and store is not None:
            row = await anyio.to_thread.run_sync(store.find_session, ref)
            if row is not None:
                self.recent.add(row["id"], _row_snapshot(row))
                found = row["id"]
        if found is None:
            raise RequestError(f"no session {ref[:80]!r} (see 'loopwarden ls')")
        return found

    async def _live(self, ref: Any) -> LiveSession | AdoptedSession | HookedSession:
        sid = await self._resolve(ref)
        session = self.sessions.get(sid)
        if session is None or session.final:
            raise RequestError(f"session {sid} has ended; only its history remains")
        return session

    def _live_snapshot(self, session: LiveSession | AdoptedSession | HookedSession) -> dict[str, Any]:
        snap = session.snapshot()
        snap["dropped_events"] = self.recorder.dropped.get(session.spec.id, 0)
        return snap

    def _snapshot(self, sid: str) -> dict[str, Any]:
        session = self.sessions.get(sid)
        if session is not None:
            return self._live_snapshot(session)
        return self.recent.get(sid) or {"id": sid}

    def _all_sessions(self, wanted: set[str] | None = None) -> list[str]:
        """The newest ended sessions and every live one, oldest first, from memory."""
        ids = [sid for sid in self.recent if sid not in self.sessions] + list(self.sessions)
        return [sid for sid in ids if wanted is None or sid in wanted]

    def _audit(self, who: Principal, session_id: str | None, action: str, target: str | None,
               note: str | None, outcome: str) -> int:
        """Queue an audit row; the mark to wait on (`_durably`) before saying it was done."""
        self.sink("action", session_id or "", {"ts": self.clock(), "actor": who.actor, "client": who.client,
                                                **who.audit_facts(), "action": action, "target": target,
                                                "note": note, "outcome": outcome})
        return self.recorder.mark(AUDIT)

    async def _target_session(self, req: dict[str, Any]) -> str | None:
        """The session a request names (by `session`, or a gate's SESSION:GATE), if it exists."""
        gate = req.get("gate")
        ref = req.get("session") or (gate.rsplit(":", 1)[0] if isinstance(gate, str) and ":" in gate else None)
        try:
            return await self._resolve(ref) if ref else None
        except RequestError:
            return None

    async def _audited(self, who: Principal, session_id: str | None, action: str, target: str | None,
                       note: str | None, outcome: str, *, stops: bool = False) -> str | None:
        """Record an operator action durably before it is carried out, or refuse it. An action that
        stops an agent (`stops`) is carried out anyway, since refusing it would leave a runaway agent
        running on a full disk: it returns the warning for the reply instead (the loss is counted)."""
        if await self._durably(self._audit(who, session_id, action, target, note, outcome)):
            return None
        error = (self.recorder.health.last_error or "unknown error")[:200]
        if stops:
            return f"done, but the audit log could not be written ({error}); the row is counted as unwritten"
        raise RequestError(f"refused: the audit log could not be written ({error}); nothing was done. Free "
                           "some space (see 'loopwarden status'); kill, pause, deny and stop-daemon still work")

    def _new_id(self) -> str:
        sid = f"s{self.next_id}"
        self.next_id += 1
        return sid

    # ---- operations (op_<name>) ---------------------------------------------
    async def op_ping(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        """The daemon's own state, with what could not be written or delivered since it started."""
        return {"protocol": PROTOCOL, "pid": os.getpid(), "sessions": len(self.sessions),
                "live": sum(1 for s in self.sessions.values() if not s.final),
                "uptime": round(self.clock() - self.started_at, 1), "socket": str(self.paths.socket),
                "database": str(self.paths.database), **self._health(), "subscribers": len(self.subscribers),
                "queued_for_subscribers": self.queue_budget.used, "stopping": self.shutting_down,
                "guardian": {"pid": self.guardian.pid, "restarts": self.guardian.restarts},
                "containment": self.containment}

    def _refuse_after_audit(self, who: Principal, sid: str, op: str) -> None:
        """A shutdown that began while the audit row was written: the session never starts, and says so."""
        if self.shutting_down:
            self._audit(who, sid, op, None, None, "failed: the daemon began shutting down")
            self._refuse_while_stopping(op)

    def _refuse_while_stopping(self, op: str) -> None:
        if self.shutting_down:
            raise RequestError(f"the daemon is shutting down and starts no more sessions; {op} again once it "
                               "has stopped (a new one starts then)")

    async def op_run(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        self._refuse_while_stopping("run")
        from ..sessions.registry import adapters

        try:
            spec_in = run_request(req.get("spec"), adapters())
        except BadRequest as exc:
            raise RequestError(str(exc)) from None
        command, env = spec_in.command, spec_in.env
        try:
            config = load_config(preset=spec_in.preset, file=spec_in.config_file, env=spec_in.config_env,
                                 sets=spec_in.sets)
        except ConfigError as exc:
            raise RequestError(str(exc)) from None
        missing = missing_program(command[0], env.get("PATH"), spec_in.cwd)
        if missing:
            raise RequestError(missing)
        sid = self._new_id()
        env = {**(env or minimal_env()), **agent_environment(self.paths.socket)}  # its own CLI calls refuse early
        name = spec_in.name or default_name(command)[:80]
        spec = SessionSpec(id=sid, name=name, command=command, adapter=spec_in.adapter, cwd=spec_in.cwd, env=env,
                           preset=config.preset, sets=spec_in.sets, task=spec_in.task)
        spiller = Spiller(config.spill.dir or self.paths.spill, preview_chars=config.spill.preview_chars,
                          truncate_chars=config.spill.threshold_chars, retention=config.spill.retention,
                          session=sid)
        await self._audited(who, sid, "run", " ".join(command)[:200], None, "started")
        self._refuse_after_audit(who, sid, "run")
        session = LiveSession(spec, config, adapters()[spec_in.adapter](), sink=self.sink, spiller=spiller,
                              on_group=self._guard_group, clock=self.clock, records=self.recorder,
                              containment=self._containment(sid))  # its cgroup, once it is sure to start
        self.sessions[sid] = session
        self._mark(sid)
        self._cleaner_wake.set()  # its spill retention may be the shortest yet
        self._tg.start_soon(self._run_session, session)
        return {"id": sid, "name": name}

    async def _run_session(self, session: LiveSession | AdoptedSession | HookedSession) -> None:
        try:
            await session.run()
        except Exception as exc:  # noqa: BLE001 - a session's failure is recorded, never the daemon's end
            self._log(f"session {session.spec.id} crashed the supervisor loop: {type(exc).__name__}: {exc}")
            session.state = "exited"
            session.ended_at = session.ended_at or self.clock()  # else its runtime would grow forever
        self._mark(session.spec.id)

    async def op_adopt(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        self._refuse_while_stopping("adopt")
        try:
            checked = adopt_request(req)
        except BadRequest as exc:
            raise RequestError(str(exc)) from None
        pid = checked.pid
        refusal = adoption_refusal(pid, peer_pid=who.pid)
        if refusal:
            raise RequestError(refusal)
        try:
            config = load_config(preset=checked.preset, env={}, sets=checked.sets)
        except ConfigError as exc:
            raise RequestError(str(exc)) from None
        try:
            session = AdoptedSession("pending", pid, config, name=checked.name, sink=self.sink, clock=self.clock)
        except (ProcessLookupError, psutil.NoSuchProcess):
            raise RequestError(f"no process {pid}") from None
        except (PermissionError, psutil.AccessDenied):
            raise RequestError(f"process {pid} belongs to another user") from None
        sid = session.spec.id = self._new_id()
        await self._audited(who, sid, "adopt", str(pid), None, "watching")
        self._refuse_after_audit(who, sid, "adopt")
        self.sessions[sid] = session
        self._mark(sid)
        self._tg.start_soon(self._run_session, session)
        return {"id": sid, "name": session.spec.name}

    async def op_hook(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """A Claude Code hook event: judged in the attached session of its session_id (made on first sight)."""
        event = req.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("session_id"), str) or not event["session_id"]:
            raise RequestError("hook needs an 'event' object with a 'session_id'")
        claude_id = event["session_id"][:200]
        try:
            kind = hooked_kind(req.get("agent"))
        except ValueError as exc:
            raise RequestError(str(exc)) from None
        session = self.hooked.get(kind.key_for(claude_id))
        if session is None or (session.final and (session.state != "terminated" or session.starts_afresh(event))):
            try:
                config = load_config(env=req.get("config_env") or {})
            except ConfigError as exc:
                raise RequestError(str(exc)) from None
            ended = [k for k, s in self.hooked.items() if s.final]
            for old in [k for k in ended if self.hooked[k].state != "terminated"] + ended[:-HOOKED_ENDED_KEPT]:
                self.hooked.pop(old, None)
            session = self.hooked[kind.key_for(claude_id)] = kind(self._new_id(), event, config, sink=self.sink,
                                                                  clock=self.clock)
            self.sessions[session.spec.id] = session
            self._mark(session.spec.id)
            self._audit(who, session.spec.id, "attach", claude_id, None, "watching")
            self._tg.start_soon(self._run_session, session)
        stop = {stat.pid for stat in ancestry(os.getpid())}  # never the daemon, nor whoever started it
        agent = hook_agent(who.chain, stop)
        if agent is not None:
            session.add_agent(agent)
        idle = req.get("idle")
        answer = session.answer(event, hold=_seconds(req.get("hold")),
                                idle=_seconds(idle) if idle is not None else None, holder=who.pid)
        await self.recorder.durable(session.spec.id, self.recorder.mark(session.spec.id))  # write ahead of it
        return answer

    async def op_hook_wait(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """The answer to a PreToolUse that `hook` held (a gate or a pause), when it is known."""
        session = self.sessions.get(await self._resolve(req.get("session")))
        if not isinstance(session, HookedSession):
            raise RequestError("hook_wait needs an attached hook session")
        ticket = req.get("ticket")
        if not isinstance(ticket, int) or isinstance(ticket, bool):
            raise RequestError("hook_wait needs the 'ticket' that hook answered")
        try:
            return await session.wait(ticket, _seconds(req.get("hold")), holder=who.pid)
        except PermissionError as exc:
            raise RequestError(f"refused: {exc}") from None

    async def op_list(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        """Every live session and the newest ended ones, oldest first. With `stored: true`, a page of the
        store instead, newest first: `limit` sessions created before session `before` (or the newest)."""
        if not req.get("stored"):
            return [self._snapshot(sid) for sid in self._all_sessions()]
        before, limit = req.get("before"), _count(req.get("limit"), LIST_PAGE, LIST_PAGE)
        if before is not None and not isinstance(before, str):
            raise RequestError("'before' must be a session id")
        store = self.store
        if store is None:
            raise RequestError("the store is not open (see 'loopwarden status'); only recent sessions are shown")
        rows = await anyio.to_thread.run_sync(lambda: store.recent_sessions(LIST_BYTES, before=before, limit=limit))
        return [_row_snapshot(row) for row in reversed(rows)]

    async def op_status(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        return self._snapshot(await self._resolve(req.get("session")))

    async def op_logs(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        """A page of a session's stored history, bounded by `limit` rows a table and by bytes.

        tail: the newest records. Otherwise the records after the cursors (`after`, `verdicts_after`,
        `actions_after`), merged by time. `newest: N` returns only the cursors from which the newest N
        of each table follow (`start`) and the newest ids now (`end`). Replies carry `next` (the cursors to
        continue from) and `more`."""
        sid = await self._resolve(req.get("session"))
        await self._flush()
        store = self.store
        if store is None:
            raise RequestError("the store is not open (see 'loopwarden status'); history cannot be read now")
        limit = _count(req.get("limit"), 1000, LOGS_LIMIT)
        max_bytes = _count(req.get("max_bytes"), LOGS_BYTES, LOGS_BYTES)
        tables = req.get("tables")
        tables = [t for t in HISTORY_TABLES if t in tables] if isinstance(tables, list) else list(HISTORY_TABLES)
        cursors = {t: _cursor(req.get(CURSOR[t])) for t in HISTORY_TABLES}
        newest = req.get("newest")

        def read() -> dict[str, Any]:  # in a worker thread, so a long read never stalls the sessions
            if newest is not None:
                n = _count(newest, 1000, 1 << 31)
                return {"session": sid, "start": {CURSOR[t]: store.newest_start(sid, t, n) for t in tables},
                        "end": {CURSOR[t]: store.newest_start(sid, t, 0) for t in tables}}
            if req.get("tail"):
                rows, more = store.newest(sid, limit=limit, max_bytes=max_bytes, tables=tables)
                after = {t: (rows[t][-1]["id"] if rows[t] else cursors[t]) for t in HISTORY_TABLES}
            else:
                rows, after, more = store.history(sid, cursors, limit=limit, max_bytes=max_bytes, tables=tables)
            return {"session": sid, **rows, "spills": store.spills(sid, limit=SPILLS_SHOWN), "more": more,
                    "next": {CURSOR[t]: after[t] for t in HISTORY_TABLES}}

        return await anyio.to_thread.run_sync(read)

    async def op_processes(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        """The agent's process tree (and, for a session we started, its whole process group)."""
        sid = await self._resolve(req.get("session"))
        for ended in [k for k, s in self.sessions.items() if s.final and k in self._proc_cache]:
            del self._proc_cache[ended]
        session = self.sessions.get(sid)
        if session is None or session.final or not session.pid:
            return []
        root, group, cache = session.pid, isinstance(session, LiveSession), self._proc_cache.get(sid, {})
        rows, self._proc_cache[sid] = await anyio.to_thread.run_sync(lambda: process_rows(root, group, cache))
        return rows

    async def op_gates(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        out = []
        for sid, session in self.sessions.items():
            if session.final:
                continue
            for gate in session.health.pending_gates():
                out.append({"session": sid, "name": session.spec.name, **gate.to_dict(), "ref": f"{sid}:{gate.id}"})
        return sorted(out, key=lambda g: g["opened_at"])

    async def _gate_ref(self, req: dict[str, Any]) -> tuple[LiveSession | HookedSession, str]:
        """The session and id of the pending gate a request names (SESSION:GATE, or a unique GATE)."""
        ref = req.get("gate")
        if not isinstance(ref, str) or not ref:
            raise RequestError("a gate reference is required, such as s3:g1 (see 'loopwarden gates')")
        if ":" in ref:
            sid, gate_id = ref.split(":", 1)
            sid = await self._resolve(sid)
            session = self.sessions.get(sid)
            if session is None or session.final:
                store = self.store
                gates = await anyio.to_thread.run_sync(store.gates, sid) if store is not None else []
                decided = [g for g in gates if g.get("gate_id") == gate_id]  # rare: an ended session
                if decided and decided[0].get("status") != "pending":
                    g = decided[0]
                    raise GateError(f"gate {ref} was already {g['status']} by {g.get('decided_by')}")
                raise RequestError(f"session {sid} has ended; only its history remains")
        else:
            gate_id = ref
            owners = [s for s in self.sessions.values() if not s.final and gate_id in s.health.gates.gates]
            if req.get("session"):
                owners = [await self._live(req["session"])]
            if len(owners) != 1:
                raise RequestError(f"gate {ref!r} is ambiguous or unknown; use SESSION:GATE, e.g. s3:g1")
            session = owners[0]
        if isinstance(session, AdoptedSession):
            raise RequestError("adopted sessions have no gates")
        session.health.gates.check(gate_id)
        return session, gate_id

    async def _decide(self, req: dict[str, Any], approve: bool, who: Principal) -> dict[str, Any]:
        note, verb = _note(req), "approve" if approve else "deny"
        try:
            session, gate_id = await self._gate_ref(req)
        except GateError as exc:
            sid = str(req.get("gate")).split(":", 1)[0]
            self._audit(who, sid, verb, str(req.get("gate")), note, f"refused: {exc}")
            raise RequestError(str(exc)) from None
        warning = await self._audited(who, session.spec.id, verb, gate_id, note, "done", stops=not approve)
        try:
            await session.decide(gate_id, approve, who.actor, note)
        except GateError as exc:  # decided meanwhile (an expiry, another console): say so in the audit too
            self._audit(who, session.spec.id, verb, gate_id, note, f"failed: {exc}")
            raise RequestError(str(exc)) from None
        return _warned({"session": session.spec.id, "gate": gate_id, "status": "approved" if approve else "denied"},
                       warning)

    async def op_approve(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        return await self._decide(req, True, who)

    async def op_deny(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        return await self._decide(req, False, who)

    async def op_grant(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._live_native(req, "grant unblock authority")
        if not session.adapter.can_inject:
            raise RequestError(f"session {session.spec.id} ({session.adapter.name}) cannot receive text, "
                               "so it cannot be granted authority")
        note = _note(req)
        await self._audited(who, session.spec.id, "grant", None, note, "injected")
        verdict = session.grant(note)
        return {"session": session.spec.id, "message": verdict.message}

    async def op_reset(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._live_native(req, "reset counters")
        counter = req.get("counter")
        if counter is not None and counter not in RESETTABLE:
            raise RequestError(f"unknown counter {str(counter)[:40]!r}; use one of {', '.join(sorted(RESETTABLE))}")
        await self._audited(who, session.spec.id, "reset", counter or "all", _note(req), "done")
        session.reset(counter)
        return {"session": session.spec.id, "reset": counter or "all"}

    async def op_inject(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._live_native(req, "inject text")
        text = req.get("text")
        if not isinstance(text, str) or not text.strip():
            raise RequestError("inject needs some text")
        if len(text) > INJECT_CHARS:
            raise RequestError(f"inject text is {len(text):,} characters; the limit is {INJECT_CHARS:,}")
        if not session.adapter.can_inject:
            raise RequestError(f"session {session.spec.id} ({session.adapter.name}) cannot receive text")
        await self._audited(who, session.spec.id, "inject", None, text[:500], "sent")
        session.inject(text)
        return {"session": session.spec.id}

    async def _live_native(self, req: dict[str, Any], what: str) -> LiveSession | HookedSession:
        session = await self._live(req.get("session"))
        if isinstance(session, AdoptedSession):
            raise RequestError(f"cannot {what} in an adopted session; it can only be watched and killed")
        return session

    async def op_pause(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._live(req.get("session"))
        warning = await self._audited(who, session.spec.id, "pause", None, _note(req), "done", stops=True)
        session.pause()
        return _warned({"session": session.spec.id, "state": session.snapshot()["state"]}, warning)

    async def op_resume(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._live(req.get("session"))
        await self._audited(who, session.spec.id, "resume", None, _note(req), "done")
        session.resume()
        return {"session": session.spec.id, "state": session.snapshot()["state"]}

    async def op_kill(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._live(req.get("session"))
        note = _note(req)
        warning = await self._audited(who, session.spec.id, "kill", None, note, "stopping", stops=True)
        self._tg.start_soon(session.kill, note)
        return _warned({"session": session.spec.id, "state": "stopping"}, warning)

    async def op_actions(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        await self._flush()
        store = self.store
        if store is None:
            raise RequestError("the store is not open (see 'loopwarden status'); the audit log cannot be read now")
        sid = await self._resolve(req["session"]) if req.get("session") else None
        limit = _count(req.get("limit"), 1000, LOGS_LIMIT)
        return await anyio.to_thread.run_sync(lambda: store.actions(session_id=sid, limit=limit))

    async def op_exit_code(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        snap = self._snapshot(await self._resolve(req.get("session")))
        return {"final": snap.get("state") in FINAL_STATES, "exit_code": final_exit_code(snap)}

    async def op_prune(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Delete the history of sessions that ended more than `older_than` seconds ago (and, with
        `audit_older_than`, audit rows that old); `dry_run` only counts."""
        older = req.get("older_than")
        if not isinstance(older, (int, float)) or isinstance(older, bool) or older < 0:
            raise RequestError("prune needs 'older_than', a number of seconds >= 0")
        audit = req.get("audit_older_than")
        if audit is not None and (not isinstance(audit, (int, float)) or isinstance(audit, bool) or audit < 0):
            raise RequestError("'audit_older_than' must be a number of seconds >= 0")
        store = self.store
        if store is None:
            raise RequestError("the store is not open (see 'loopwarden status'); nothing can be pruned now")
        now = self.clock()
        if req.get("dry_run"):
            counts = await anyio.to_thread.run_sync(lambda: store.prunable(now - older, _before(now, audit)))
            return {"dry_run": True, "deleted": counts}
        await self._audited(who, None, "prune", f"ended before {_ago(older)}", _note(req), "pruning")
        return {"dry_run": False, "deleted": await self._prune(now - older, _before(now, audit))}

    async def _prune(self, ended_before: float, audit_before: float | None) -> dict[str, int]:
        store = self.store
        if store is None:
            return {}
        await self._flush()
        deleted = await anyio.to_thread.run_sync(lambda: store.prune(ended_before, audit_before))
        for sid in [sid for sid in self.recent if sid not in self.sessions]:
            snap = self.recent.get(sid) or {}
            if (snap.get("ended_at") or snap.get("created_at") or 0) < ended_before:
                self.recent.discard(sid)
        return deleted

    async def _pruner(self) -> None:
        """Apply `store.retention` (and `store.audit_retention`) from the daemon's configuration, hourly."""
        while True:
            try:
                config = load_config()
            except ConfigError as exc:
                self._log(f"prune skipped: {exc}")
                config = load_config(env={})
            retention, audit = config.store.retention, config.store.audit_retention
            if retention or audit:
                now = self.clock()
                try:
                    deleted = await self._prune(now - retention if retention else 0.0, _before(now, audit or None))
                except StoreError as exc:
                    self._log(f"prune failed: {exc}")
                else:
                    if any(deleted.values()):
                        self._log("pruned history: " + ", ".join(f"{n} {t}" for t, n in deleted.items() if n))
            await anyio.sleep(3600)

    async def op_shutdown(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Stop every session and exit, within SHUTDOWN_CAP; `run` and `adopt` are refused from now on."""
        self._begin_shutdown()
        warning = await self._audited(who, None, "stop-daemon", None, _note(req), "stopping", stops=True)
        self._tg.start_soon(self._stop_soon)
        return _warned({"stopping": True, "sessions": len([s for s in self.sessions.values() if not s.final]),
                        "pid": os.getpid(), "within": SHUTDOWN_CAP}, warning)


async def _send(stream: SocketStream, data: bytes) -> None:
    """A reply; a client that does not take it within REPLY_SECONDS is disconnected (TimeoutError)."""
    with anyio.fail_after(REPLY_SECONDS):
        await stream.send(data)


async def _drain_client(stream: SocketStream, scope: Any) -> None:
    """A subscriber only listens; when it hangs up, end the subscription."""
    try:
        while await stream.receive(1 << 16):
            pass
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    scope.cancel()


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


def _only_hangups(exc: BaseException) -> bool:
    """Whether an exception (group) is nothing but a client going away."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_hangups(e) for e in exc.exceptions)
    return isinstance(exc, (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError))


def _id_number(sid: str) -> int:
    return int(sid[1:]) if sid[:1] == "s" and sid[1:].isdigit() else 0


def _reply(rid: Any, *, result: Any = None, error: str | None = None) -> bytes:
    if error is not None:
        return orjson.dumps({"id": rid, "ok": False, "error": error}) + b"\n"
    return orjson.dumps({"id": rid, "ok": True, "result": result}, default=str) + b"\n"


def _seconds(value: Any) -> float:
    """A non-negative number of seconds from a request (anything else: 0)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0.0


def _warned(result: dict[str, Any], warning: str | None) -> dict[str, Any]:
    return {**result, "warning": warning} if warning else result


def _count(value: Any, default: int, most: int) -> int:
    """A whole number from a request, between 1 and `most` (`default` when absent or not a number)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return default
    return max(1, min(value, most))


def _cursor(value: Any) -> int:
    """A row id to read after (0: from the start)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _before(now: float, seconds: float | None) -> float | None:
    return None if seconds is None else now - seconds


def _ago(seconds: float) -> str:
    from ..supervisor.config import format_duration

    return f"{format_duration(seconds)} ago"


def _text_size(data: dict[str, Any]) -> int:
    """Bytes of a record's top-level text: what it costs in memory, roughly, when no line length is known."""
    return sum(len(v) for v in data.values() if isinstance(v, str))


def _attempted_target(req: dict[str, Any]) -> str | None:
    """What a refused request aimed at, for the audit log: a gate, a counter, a pid or a command."""
    for key in ("gate", "counter", "pid"):
        if isinstance(req.get(key), (str, int)) and not isinstance(req.get(key), bool):
            return str(req[key])[:200]
    spec = req.get("spec")
    command = spec.get("command") if isinstance(spec, dict) else None
    return " ".join(map(str, command))[:200] if isinstance(command, list) else None


def _note(req: dict[str, Any]) -> str | None:
    note = req.get("note")
    return note[:2000] if isinstance(note, str) and note.strip() else None


def _verdict_row(data: dict[str, Any]) -> dict[str, Any]:
    return {"seq": data.get("seq"), "ts": data.get("ts"), "action": data.get("action"), "rule": data.get("rule"),
            "reason": data.get("reason"), "message": data.get("message"), "termination": data.get("termination"),
            "target": data.get("target"), "gate_id": data.get("gate_id"), "evidence": data.get("evidence") or {}}


_SESSION_COLUMNS = ("id", "name", "adapter", "command", "cwd", "env_keys", "preset", "state", "created_at",
                    "started_at", "ended_at", "pid", "exit_code", "termination", "termination_text",
                    "dropped_events", "handshake")


def _session_row(snap: dict[str, Any]) -> dict[str, Any]:
    row = {k: snap.get(k) for k in _SESSION_COLUMNS}
    row["snapshot"] = snap
    return row


def _row_snapshot(row: dict[str, Any]) -> dict[str, Any]:
    snap = row.get("snapshot")
    if isinstance(snap, dict):
        snap = dict(snap)
        for key in ("state", "termination", "termination_text", "ended_at", "exit_code"):
            snap[key] = row.get(key, snap.get(key))
        return snap
    return dict(row)


def run_daemon(paths: Paths) -> int:
    """`loopwarden serve`: run in the foreground until SIGTERM/SIGINT or stop-daemon."""
    try:
        anyio.run(Daemon(paths).serve)
    except RuntimeError as exc:
        sys.stderr.write(f"loopwarden: error: {exc}\n")
        return 1
    except (OSError, StoreError) as exc:  # a bad runtime directory, a socket path too long, a bad database
        filename = getattr(exc, "filename", None)
        where = f" ({filename})" if filename else ""
        sys.stderr.write(f"loopwarden: error: {getattr(exc, 'strerror', None) or exc}{where}\n")
        return 1
    return 0
