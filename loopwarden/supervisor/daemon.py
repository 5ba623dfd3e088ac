"""The daemon: owns every session, is the only writer of the store, serves the control socket."""

from __future__ import annotations

import fcntl
import os
import pwd
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio
import orjson
import psutil
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .config import ConfigError, load_config
from .gates import GateError
from .health import RESETTABLE
from .cgroups import CgroupTree
from .containment import Containment, daemon_instance
from .guardian_link import GuardianLink
from .paths import Paths, private_dir
from .procfs import ProcTable
from .reaper import become_subreaper, reap_orphans
from .requests import BadRequest, adopt_request, run_request
from .commands import default_name, missing_program
from .session import LiveSession, SessionSpec, tree_pids
from . import spill_cleaner
from .verdicts import FINAL_STATES, final_exit_code
from .adopted import AdoptedSession
from .hooked import HookedSession
from ..sessions.claude_hooks import FRESH_START_EVENTS
from .spill import Spiller
from .store import Batch, Store, StoreError

PROTOCOL = 1
MAX_REQUEST = 1 << 20
FLUSH_SECONDS = 0.1
PUBLISH_SECONDS = 0.25
SAMPLE_SECONDS = 0.5  # 2 Hz with few sessions
SAMPLES_PER_SECOND = 20  # ... and at most this many session samples a second
PENDING_EVENTS_CAP = 200_000  # past this, events are counted as dropped (never silently)
BACKLOG_HIGH = 5_000  # past this many unwritten events, session pumps wait for the store
BACKLOG_LOW = 1_000
SUBSCRIBER_QUEUE = 10_000
BROADCAST_LIMIT = 16 << 10  # bytes of one broadcast message; so a slow subscriber holds at most ~160 MB
SHUTDOWN_CAP = 10.0  # seconds from a stop request to the daemon's exit, whatever limits.kill_grace says
SHUTDOWN_KILL_AT = 7.0  # ... SIGTERM's grace ends here at the latest: sessions SIGKILL what is left
SHUTDOWN_FORCE_AT = 8.5  # ... the daemon SIGKILLs what sessions have not ended by now (a stuck session)
SHUTDOWN_CLOSE = 1.0  # ... and keeps this long for the last records, the store and the cgroups


class RequestError(Exception):
    """A request the daemon refuses; the message is sent back as one line."""


@dataclass
class Subscriber:
    send: MemoryObjectSendStream[bytes]
    sessions: set[str] | None
    events: bool
    skipped: int = 0


@dataclass
class Pending:
    batch: Batch = field(default_factory=Batch)
    events: int = 0


def peer_uid(stream: SocketStream) -> tuple[int, int]:
    """(uid, pid) of the process on the other end of a unix socket (SO_PEERCRED)."""
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return uid, pid


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class Daemon:
    def __init__(self, paths: Paths, *, clock: Callable[[], float] = time.time) -> None:
        self.paths = paths
        self.clock = clock
        self.sessions: dict[str, LiveSession | AdoptedSession | HookedSession] = {}
        self.hooked: dict[str, HookedSession] = {}  # Claude session_id -> its attached session
        self.subscribers: list[Subscriber] = []
        self.pending = Pending()
        self.dirty: set[str] = set()
        self.dropped: dict[str, int] = {}
        self.store: Store | None = None
        self.guardian = GuardianLink(self._log)
        self.cgroups: CgroupTree | None = None
        self.containment = "tracking"  # how sessions' processes are found: "cgroup" or "tracking"
        self.instance = ""  # "PID.START" of this daemon, the end of every agent's LOOPWARDEN_SESSION
        self.shutting_down = False
        self._stop_deadline = 0.0  # monotonic: when the daemon must be gone (SHUTDOWN_CAP after the request)
        self._cleaner_wake = anyio.Event()
        self.next_id = 1
        self.history: dict[str, dict[str, Any]] = {}
        self.started_at = clock()
        self._stop = anyio.Event()
        self._write_lock = anyio.Lock()
        self._has_work = anyio.Event()
        self._backlog_drained = anyio.Event()
        self._backlog_drained.set()
        self._orphans = anyio.Event()
        self.subreaper = False
        self._tg: Any = None
        self._proc_cache: dict[str, dict[int, psutil.Process]] = {}  # per session, so cpu_percent has a base

    # ---- lifecycle ------------------------------------------------------
    async def serve(self, ready: Callable[[], None] | None = None) -> None:
        sock_path = self.paths.socket  # a path too long for a socket is refused before anything is made
        private_dir(self.paths.runtime)
        private_dir(self.paths.data)
        private_dir(self.paths.cache)
        lock = self._lock()
        private_dir(sock_path.parent)
        if sock_path.exists() or sock_path.is_symlink():
            sock_path.unlink()
        self.store = Store.open(self.paths.database)
        lost = self.store.mark_lost(self.clock())
        self.history = {r["id"]: r for r in self.store.sessions()}  # sessions of earlier daemons
        self.next_id = 1 + max((_id_number(sid) for sid in self.history), default=0)
        self._start_guardian()
        self.subreaper = become_subreaper()
        old_umask = os.umask(0o177)
        try:
            listener = await anyio.create_unix_listener(sock_path)
        finally:
            os.umask(old_umask)
        os.chmod(sock_path, 0o600)
        self._log(f"daemon {os.getpid()} listening on {sock_path}" + (f"; marked lost: {', '.join(lost)}" if lost else ""))
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._flusher)
                tg.start_soon(self._sampler)
                tg.start_soon(self.guardian.watch)
                if self.subreaper:
                    tg.start_soon(self._reaper)
                tg.start_soon(self._spill_cleaner)
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
            self._flush_now()
            self.store.close()
            if self.cgroups is not None and not self.cgroups.close():
                self._log(f"cgroup {self.cgroups.path} still holds processes; the guardian ends them")
            self.guardian.close()
            os.close(lock)

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
            while any(not s.final for s in live):
                await anyio.sleep(0.02)
        stragglers = [s for s in live if not s.final]
        for session in stragglers:  # a session stuck past its own SIGKILL: no more waiting for anything
            if isinstance(session, (LiveSession, AdoptedSession)):
                session.kill_now()
        with anyio.move_on_after(max(0.0, self._stop_deadline - SHUTDOWN_CLOSE - time.monotonic())):
            while any(not s.final for s in live):
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
        await self._flush()  # waits for a flush under way, then writes the rest; no await follows it

    def _log(self, text: str) -> None:
        sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")
        sys.stderr.flush()

    # ---- records: store and broadcast -------------------------------------
    def sink(self, kind: str, session_id: str, data: dict[str, Any]) -> None:
        """Every record a session produces: batched for the store, broadcast to subscribers."""
        batch = self.pending.batch
        self._has_work.set()
        if kind == "session":
            self.dirty.add(session_id)
            return
        if kind in ("event", "log"):
            if self.pending.events >= PENDING_EVENTS_CAP:
                self.dropped[session_id] = self.dropped.get(session_id, 0) + 1
                return
            self.pending.events += 1
            if self.pending.events >= BACKLOG_HIGH and self._backlog_drained.is_set():
                self._backlog_drained = anyio.Event()
            if kind == "log":
                row = {"session_id": session_id, "seq": None, "ts": data.get("ts"), "kind": "log", "data": data}
            else:
                row = {"session_id": session_id, "seq": data.get("seq"), "ts": data.get("ts") or self.clock(),
                       "kind": data.get("type"), "data": data}
            batch.events.append(row)
            self._broadcast(kind, session_id, data, is_event=True)
            return
        if kind == "verdict":
            batch.verdicts.append({"session_id": session_id, **_verdict_row(data)})
        elif kind == "gate":
            batch.gates_upsert.append({"session_id": session_id, "gate_id": data["id"],
                                       **{k: v for k, v in data.items() if k != "id"}})
        elif kind == "spill":
            batch.spills.append({"session_id": session_id, **data})
        elif kind == "action":
            batch.actions.append({"session_id": session_id, **data})
        self._broadcast(kind, session_id, data, is_event=False)

    def _mark(self, session_id: str) -> None:
        """A session changed: publish its snapshot on the next round."""
        self.dirty.add(session_id)
        self._has_work.set()

    def _broadcast(self, kind: str, session_id: str, data: dict[str, Any], *, is_event: bool) -> None:
        if not self.subscribers:
            return
        message: bytes | None = None
        for sub in self.subscribers:
            if is_event and not sub.events:
                continue
            if sub.sessions is not None and session_id not in sub.sessions:
                continue
            if message is None:
                message = orjson.dumps({"kind": kind, "session": session_id, "data": data},
                                       default=str) + b"\n"
                if len(message) > BROADCAST_LIMIT:  # subscribers get a preview; the store has the rest
                    message = orjson.dumps({"kind": kind, "session": session_id, "data": _clipped(data)},
                                           default=str) + b"\n"
            try:
                sub.send.send_nowait(message)
            except anyio.WouldBlock:
                sub.skipped += 1  # a slow subscriber skips ahead; it never blocks a session
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    async def _flusher(self) -> None:
        """Wakes only when something is pending, then batches for FLUSH_SECONDS: an idle daemon sleeps."""
        last_publish = 0.0
        while True:
            await self._has_work.wait()
            await anyio.sleep(FLUSH_SECONDS)
            self._has_work = anyio.Event()
            now = time.monotonic()
            if now - last_publish >= PUBLISH_SECONDS:
                last_publish = now
                self._publish_dirty()
            elif self.dirty:
                self._has_work.set()  # publish on a later round, at most PUBLISH_SECONDS apart
            await self._flush()

    async def _flush(self) -> None:
        """Write what is pending; readers call it too, so they see every record before them."""
        async with self._write_lock:
            if len(self.pending.batch):
                batch, self.pending = self.pending.batch, Pending()
                self._count_dropped(await anyio.to_thread.run_sync(self._write, batch))
            if self.pending.events < BACKLOG_LOW:
                self._backlog_drained.set()

    async def backpressure(self) -> None:
        """Held by a session's pump while the store is behind: the agent's pipe fills and it
        waits, so memory stays flat under a flood and nothing is dropped."""
        if not self._backlog_drained.is_set():
            self._has_work.set()
            await self._backlog_drained.wait()

    def _publish_dirty(self) -> None:
        for session_id in list(self.dirty):
            session = self.sessions.get(session_id)
            if session is None:
                continue
            snap = session.snapshot()
            snap["dropped_events"] = self.dropped.get(session_id, 0)
            self.pending.batch.sessions_upsert.append(_session_row(snap))
            self._broadcast("session", session_id, snap, is_event=False)
        self.dirty.clear()

    def _flush_now(self) -> None:
        """The last write, at shutdown, outside the event loop."""
        self._publish_dirty()
        if len(self.pending.batch):
            batch, self.pending = self.pending.batch, Pending()
            self._count_dropped(self._write(batch))

    def _write(self, batch: Batch) -> list[str]:
        """One batch to the store (any thread); on failure (a full disk) it is logged, never fatal,
        and the sessions of its events are returned so the caller counts them as dropped."""
        assert self.store is not None
        try:
            self.store.write(batch)
        except StoreError as exc:
            self._log(f"store write failed, {len(batch.events)} events counted as dropped: {exc}")
            return [row.get("session_id") or "" for row in batch.events]
        return []

    def _count_dropped(self, session_ids: list[str]) -> None:
        for sid in session_ids:
            self.dropped[sid] = self.dropped.get(sid, 0) + 1
            self.dirty.add(sid)

    async def _spill_cleaner(self) -> None:
        """Remove spill files past their retention in every spill directory in use, each session's with
        the session's own retention: at start, then when the next file expires (see spill_cleaner.interval)."""
        while True:
            config = load_config(env={}).spill
            plans = spill_cleaner.plan(config.dir or str(self.paths.spill), config.retention, self._spill_uses())
            removed = await anyio.to_thread.run_sync(spill_cleaner.clean, plans, self.clock())
            if removed:
                self._log(f"removed {removed} spill files past their retention from {len(plans)} directories")
            live = [s.spiller.retention for s in self.sessions.values()
                    if isinstance(s, LiveSession) and s.spiller is not None and not s.final]
            wait = await anyio.to_thread.run_sync(spill_cleaner.interval, plans, live, self.clock())
            self._cleaner_wake = anyio.Event()
            with anyio.move_on_after(wait):
                await self._cleaner_wake.wait()  # a new session may bring a shorter retention

    def _spill_uses(self) -> list[spill_cleaner.SessionSpill]:
        """Where each session, of this daemon or an earlier one, spills, and its retention."""
        uses = {}
        for sid, row in self.history.items():
            spill = (row.get("snapshot") or {}).get("spill") if isinstance(row.get("snapshot"), dict) else None
            if isinstance(spill, dict) and isinstance(spill.get("dir"), str):
                uses[sid] = spill_cleaner.SessionSpill(sid, spill["dir"], float(spill.get("retention") or 0))
        for sid, session in self.sessions.items():
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
            try:
                await self._connection(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
                pass
            except Exception as exc:  # noqa: BLE001 - one client's trouble must never end the daemon
                if not _only_hangups(exc):
                    self._log(f"connection failed: {type(exc).__name__}: {exc}")
            finally:
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
            await stream.send(_reply(None, error=f"refused: uid {uid} is not the owner of this daemon (uid {os.getuid()})"))
            return
        actor = f"uid {uid} ({user_name(uid)})"
        buffer = b""
        while True:
            try:
                chunk = await stream.receive(1 << 16)
            except anyio.EndOfStream:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                done = await self._request(stream, line, actor, pid)
                if done:
                    return
            if len(buffer) > MAX_REQUEST:
                await stream.send(_reply(None, error=f"request longer than {MAX_REQUEST:,} bytes; closing"))
                return

    async def _request(self, stream: SocketStream, line: bytes, actor: str, peer_pid: int) -> bool:
        """Answer one request; True when the connection is now a subscription (or must close)."""
        try:
            request = orjson.loads(line)
        except orjson.JSONDecodeError:
            await stream.send(_reply(None, error="request is not valid JSON"))
            return False
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            await stream.send(_reply(None, error="request must be an object with an 'op'"))
            return False
        rid = request.get("id")
        op = request["op"]
        client = f"{str(request.get('client') or 'client')[:40]} pid {peer_pid}"
        if op == "subscribe":
            await self._subscribe(stream, request, rid)
            return True
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            await stream.send(_reply(rid, error=f"unknown op {op[:40]!r}"))
            return False
        try:
            result = await handler(request, actor=actor, client=client)
        except RequestError as exc:
            await stream.send(_reply(rid, error=str(exc)))
            return False
        except Exception as exc:  # a bug must not take the daemon down
            self._log(f"error in {op}: {type(exc).__name__}: {exc}")
            await stream.send(_reply(rid, error=f"internal error in {op}: {type(exc).__name__}: {exc}"))
            return False
        await stream.send(_reply(rid, result=result))
        return op == "shutdown"

    async def _subscribe(self, stream: SocketStream, request: dict[str, Any], rid: Any) -> None:
        sessions = request.get("sessions")
        try:
            wanted = set(map(self._resolve_id, sessions)) if isinstance(sessions, list) else None
        except RequestError as exc:
            await stream.send(_reply(rid, error=str(exc)))
            return
        send, receive = anyio.create_memory_object_stream[bytes](SUBSCRIBER_QUEUE)
        sub = Subscriber(send, wanted, bool(request.get("events", False)))
        self.subscribers.append(sub)
        try:
            snapshot = [self._snapshot(s) for s in self._all_sessions(wanted)]
            await stream.send(_reply(rid, result={"sessions": snapshot}))
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_client, stream, tg.cancel_scope)
                await self._pump_subscriber(stream, sub, receive)
        finally:
            self.subscribers.remove(sub)
            send.close()

    async def _pump_subscriber(self, stream: SocketStream, sub: Subscriber,
                               receive: MemoryObjectReceiveStream[bytes]) -> None:
        async with receive:
            async for message in receive:
                if sub.skipped:
                    skipped, sub.skipped = sub.skipped, 0
                    await stream.send(orjson.dumps({"kind": "skipped", "count": skipped}) + b"\n")
                await stream.send(message)

    # ---- helpers ------------------------------------------------------------
    def _resolve_id(self, ref: Any) -> str:
        if not isinstance(ref, str) or not ref:
            raise RequestError("a session id or name is required")
        if ref in self.sessions:
            return ref
        named = [s.spec.id for s in self.sessions.values() if s.spec.name == ref]
        if named:
            return named[-1]
        if ref in self.history:
            return ref
        rows = [sid for sid, r in self.history.items() if r.get("name") == ref]
        if rows:
            return rows[-1]
        raise RequestError(f"no session {ref!r} (see 'loopwarden ls')")

    def _live(self, ref: Any) -> LiveSession | AdoptedSession | HookedSession:
        sid = self._resolve_id(ref)
        session = self.sessions.get(sid)
        if session is None or session.final:
            raise RequestError(f"session {sid} has ended; only its history remains")
        return session

    def _snapshot(self, sid: str) -> dict[str, Any]:
        session = self.sessions.get(sid)
        if session is not None:
            snap = session.snapshot()
            snap["dropped_events"] = self.dropped.get(sid, 0)
            return snap
        return _row_snapshot(self.history.get(sid) or {"id": sid})

    def _all_sessions(self, wanted: set[str] | None = None) -> list[str]:
        """Every session id, oldest first, from memory: the event loop never waits on the store."""
        ids = list(self.history) + [sid for sid in self.sessions if sid not in self.history]
        return [sid for sid in ids if wanted is None or sid in wanted]

    def _audit(self, actor: str, client: str, session_id: str | None, action: str, target: str | None,
               note: str | None, outcome: str) -> None:
        self.sink("action", session_id or "", {"ts": self.clock(), "actor": actor, "client": client,
                                                "action": action, "target": target, "note": note,
                                                "outcome": outcome})

    def _new_id(self) -> str:
        sid = f"s{self.next_id}"
        self.next_id += 1
        return sid

    # ---- operations (op_<name>) ---------------------------------------------
    async def op_ping(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        return {"protocol": PROTOCOL, "pid": os.getpid(), "sessions": len(self.sessions),
                "uptime": round(self.clock() - self.started_at, 1), "socket": str(self.paths.socket),
                "database": str(self.paths.database), "stopping": self.shutting_down,
                "guardian": {"pid": self.guardian.pid, "restarts": self.guardian.restarts},
                "containment": self.containment}

    def _refuse_while_stopping(self, op: str) -> None:
        if self.shutting_down:
            raise RequestError(f"the daemon is shutting down and starts no more sessions; {op} again once it "
                               "has stopped (a new one starts then)")

    async def op_run(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        self._refuse_while_stopping("run")
        from ..sessions import ADAPTERS

        try:
            spec_in = run_request(req.get("spec"), ADAPTERS)
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
        name = spec_in.name or default_name(command)[:80]
        spec = SessionSpec(id=sid, name=name, command=command, adapter=spec_in.adapter, cwd=spec_in.cwd, env=env,
                           preset=config.preset, sets=spec_in.sets, task=spec_in.task)
        spiller = Spiller(config.spill.dir or self.paths.spill, preview_chars=config.spill.preview_chars,
                          truncate_chars=config.spill.threshold_chars, retention=config.spill.retention,
                          session=sid)
        session = LiveSession(spec, config, ADAPTERS[spec_in.adapter](), sink=self.sink, spiller=spiller,
                              on_group=self._guard_group, clock=self.clock, throttle=self.backpressure,
                              containment=self._containment(sid))
        self.sessions[sid] = session
        self._mark(sid)
        self._cleaner_wake.set()  # its spill retention may be the shortest yet
        self._audit(actor, client, sid, "run", " ".join(command)[:200], None, "started")
        self._tg.start_soon(self._run_session, session)
        return {"id": sid, "name": name}

    async def _run_session(self, session: LiveSession | AdoptedSession | HookedSession) -> None:
        try:
            await session.run()
        except Exception as exc:  # a session's failure is recorded, never the daemon's end
            self._log(f"session {session.spec.id} crashed the supervisor loop: {type(exc).__name__}: {exc}")
            session.state = "exited"
            session.ended_at = session.ended_at or self.clock()  # else its runtime would grow forever
        self._mark(session.spec.id)

    async def op_adopt(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        self._refuse_while_stopping("adopt")
        try:
            checked = adopt_request(req)
        except BadRequest as exc:
            raise RequestError(str(exc)) from None
        pid = checked.pid
        refusal = adoption_refusal(pid, peer_pid=int(client.rsplit(" ", 1)[-1]))
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
        self.sessions[sid] = session
        self._mark(sid)
        self._audit(actor, client, sid, "adopt", str(pid), None, "watching")
        self._tg.start_soon(self._run_session, session)
        return {"id": sid, "name": session.spec.name}

    async def op_hook(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        """A Claude Code hook event: judged in the attached session of its session_id (made on first sight)."""
        event = req.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("session_id"), str) or not event["session_id"]:
            raise RequestError("hook needs an 'event' object with a 'session_id'")
        claude_id, name = event["session_id"][:200], str(event.get("hook_event_name") or "")
        session = self.hooked.get(claude_id)
        if session is None or (session.final and (session.state != "terminated" or name in FRESH_START_EVENTS)):
            try:
                config = load_config(env=req.get("config_env") or {})
            except ConfigError as exc:
                raise RequestError(str(exc)) from None
            for old in [k for k, s in self.hooked.items() if s.final and s.state != "terminated"]:
                del self.hooked[old]
            session = self.hooked[claude_id] = HookedSession(self._new_id(), event, config, sink=self.sink,
                                                             clock=self.clock)
            self.sessions[session.spec.id] = session
            self._mark(session.spec.id)
            self._audit(actor, client, session.spec.id, "attach", claude_id, None, "watching")
            self._tg.start_soon(self._run_session, session)
        idle = req.get("idle")
        return session.answer(event, hold=_seconds(req.get("hold")),
                              idle=_seconds(idle) if idle is not None else None)

    async def op_hook_wait(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        """The answer to a PreToolUse that `hook` held (a gate or a pause), when it is known."""
        session = self.sessions.get(self._resolve_id(req.get("session")))
        if not isinstance(session, HookedSession):
            raise RequestError("hook_wait needs an attached hook session")
        ticket = req.get("ticket")
        if not isinstance(ticket, int) or isinstance(ticket, bool):
            raise RequestError("hook_wait needs the 'ticket' that hook answered")
        return await session.wait(ticket, _seconds(req.get("hold")))

    async def op_list(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        return [self._snapshot(sid) for sid in self._all_sessions()]

    async def op_status(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        return self._snapshot(self._resolve_id(req.get("session")))

    async def op_logs(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        sid = self._resolve_id(req.get("session"))
        await self._flush()
        assert self.store is not None
        limit = max(1, min(int(req.get("limit") or 1000), 10_000))
        store = self.store
        tail, after, verdicts_after = bool(req.get("tail")), int(req.get("after") or 0), int(req.get("verdicts_after") or 0)

        def read() -> dict[str, Any]:  # in a worker thread, so a long read never stalls the sessions
            if tail:  # the newest `limit` records, oldest first
                events, verdicts = store.last("events", sid, limit), store.last("verdicts", sid, limit)
            else:
                events = store.events(sid, after_id=after, limit=limit)
                verdicts = store.verdicts(sid, after_id=verdicts_after, limit=limit)
            return {"session": sid, "events": events, "verdicts": verdicts,
                    "actions": store.actions(session_id=sid, limit=limit),
                    "spills": store.spills(sid)[-limit:]}

        return await anyio.to_thread.run_sync(read)

    async def op_processes(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        """The agent's process tree (and, for a session we started, its whole process group)."""
        sid = self._resolve_id(req.get("session"))
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

    def _gate_ref(self, req: dict[str, Any]) -> tuple[LiveSession | HookedSession, str]:
        ref = req.get("gate")
        if not isinstance(ref, str) or not ref:
            raise RequestError("a gate reference is required, such as s3:g1 (see 'loopwarden gates')")
        if ":" in ref:
            sid, gate_id = ref.split(":", 1)
            sid = self._resolve_id(sid)
            session = self.sessions.get(sid)
            if session is None or session.final:
                assert self.store is not None
                decided = [g for g in self.store.gates(sid) if g.get("gate_id") == gate_id]  # rare: an ended session
                if decided and decided[0].get("status") != "pending":
                    g = decided[0]
                    raise GateError(f"gate {ref} was already {g['status']} by {g.get('decided_by')}")
                raise RequestError(f"session {sid} has ended; only its history remains")
        else:
            gate_id = ref
            owners = [s for s in self.sessions.values() if not s.final and gate_id in s.health.gates.gates]
            if req.get("session"):
                owners = [self._live(req["session"])]
            if len(owners) != 1:
                raise RequestError(f"gate {ref!r} is ambiguous or unknown; use SESSION:GATE, e.g. s3:g1")
            session = owners[0]
        if isinstance(session, AdoptedSession):
            raise RequestError("adopted sessions have no gates")
        return session, gate_id

    async def _decide(self, req: dict[str, Any], approve: bool, actor: str, client: str) -> dict[str, Any]:
        note = _note(req)
        try:
            session, gate_id = self._gate_ref(req)
        except GateError as exc:
            sid = str(req.get("gate")).split(":", 1)[0]
            self._audit(actor, client, sid, "approve" if approve else "deny", str(req.get("gate")), note,
                        f"refused: {exc}")
            raise RequestError(str(exc)) from None
        try:
            await session.decide(gate_id, approve, actor, note)
        except GateError as exc:
            self._audit(actor, client, session.spec.id, "approve" if approve else "deny", gate_id, note,
                        f"refused: {exc}")
            raise RequestError(str(exc)) from None
        self._audit(actor, client, session.spec.id, "approve" if approve else "deny", gate_id, note, "done")
        return {"session": session.spec.id, "gate": gate_id, "status": "approved" if approve else "denied"}

    async def op_approve(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        return await self._decide(req, True, actor, client)

    async def op_deny(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        return await self._decide(req, False, actor, client)

    async def op_grant(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        session = self._live_native(req, "grant unblock authority")
        if not session.adapter.can_inject:
            raise RequestError(f"session {session.spec.id} ({session.adapter.name}) cannot receive text, "
                               "so it cannot be granted authority")
        note = _note(req)
        verdict = session.grant(note)
        self._audit(actor, client, session.spec.id, "grant", None, note, "injected")
        return {"session": session.spec.id, "message": verdict.message}

    async def op_reset(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        session = self._live_native(req, "reset counters")
        counter = req.get("counter")
        if counter is not None and counter not in RESETTABLE:
            raise RequestError(f"unknown counter {counter!r}; use one of {', '.join(sorted(RESETTABLE))}")
        session.reset(counter)
        self._audit(actor, client, session.spec.id, "reset", counter or "all", _note(req), "done")
        return {"session": session.spec.id, "reset": counter or "all"}

    async def op_inject(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        session = self._live_native(req, "inject text")
        text = req.get("text")
        if not isinstance(text, str) or not text.strip():
            raise RequestError("inject needs some text")
        if not session.inject(text):
            raise RequestError(f"session {session.spec.id} ({session.adapter.name}) cannot receive text")
        self._audit(actor, client, session.spec.id, "inject", None, text[:500], "sent")
        return {"session": session.spec.id}

    def _live_native(self, req: dict[str, Any], what: str) -> LiveSession | HookedSession:
        session = self._live(req.get("session"))
        if isinstance(session, AdoptedSession):
            raise RequestError(f"cannot {what} in an adopted session; it can only be watched and killed")
        return session

    async def op_pause(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        session = self._live(req.get("session"))
        session.pause()
        self._audit(actor, client, session.spec.id, "pause", None, _note(req), "done")
        return {"session": session.spec.id, "state": session.snapshot()["state"]}

    async def op_resume(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        session = self._live(req.get("session"))
        session.resume()
        self._audit(actor, client, session.spec.id, "resume", None, _note(req), "done")
        return {"session": session.spec.id, "state": session.snapshot()["state"]}

    async def op_kill(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        session = self._live(req.get("session"))
        note = _note(req)
        self._audit(actor, client, session.spec.id, "kill", None, note, "stopping")
        self._tg.start_soon(session.kill, note)
        return {"session": session.spec.id, "state": "stopping"}

    async def op_actions(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        await self._flush()
        assert self.store is not None
        sid = self._resolve_id(req["session"]) if req.get("session") else None
        store, limit = self.store, int(req.get("limit") or 1000)
        return await anyio.to_thread.run_sync(lambda: store.actions(session_id=sid, limit=limit))

    async def op_exit_code(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        snap = self._snapshot(self._resolve_id(req.get("session")))
        return {"final": snap.get("state") in FINAL_STATES, "exit_code": final_exit_code(snap)}

    async def op_shutdown(self, req: dict[str, Any], *, actor: str, client: str) -> dict[str, Any]:
        """Stop every session and exit, within SHUTDOWN_CAP; `run` and `adopt` are refused from now on."""
        self._begin_shutdown()
        self._audit(actor, client, None, "stop-daemon", None, _note(req), "stopping")
        self._tg.start_soon(self._stop_soon)
        return {"stopping": True, "sessions": len([s for s in self.sessions.values() if not s.final]),
                "pid": os.getpid(), "within": SHUTDOWN_CAP}


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
            proc = cache.get(pid)
            if proc is None or not proc.is_running():
                proc = psutil.Process(pid)
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


def _clipped(data: dict[str, Any], limit: int = 2000) -> dict[str, Any]:
    """A record with long strings cut, for broadcasting."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, str) and len(value) > limit:
            out[key] = value[:limit] + f"… [{len(value):,} characters]"
        elif isinstance(value, (dict, list)):
            text = orjson.dumps(value, default=str)
            out[key] = value if len(text) <= limit else text[:limit].decode(errors="replace") + "…"
        else:
            out[key] = value
    out["clipped"] = True
    return out


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
