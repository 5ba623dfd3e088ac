"""The daemon's socket server: connections, the peer's identity, requests dispatched to `op_<name>`, subscriptions."""

from __future__ import annotations

import os
import re
import select
import socket
import struct
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import orjson
from anyio.abc import SocketAttribute, SocketStream

from ..supervisor.bounds import MAX_REQUEST_BYTES
from .audit import AuditLog
from .broadcast import Broadcaster
from .daemon_health import DaemonHealth
from .hook_agents import HookClaims
from .principal import Principal, classify, daemon_locators, operator_op, owner_refusal, process_owner
from .registry import SessionRegistry
from .requests import AlreadyAudited, RequestError
from .store import StoreError
from .subscribers import Subscriber

_BLANKS = re.compile(rb"[ \t\r\n]+")
MAX_REQUEST = MAX_REQUEST_BYTES
MAX_CONNECTIONS = 256  # open at once; each holds at most MAX_REQUEST of unread request
REPLY_SECONDS = 30.0  # a client that does not take its reply within this long is disconnected
LARGE_REPLIES = frozenset({"logs", "list", "actions", "gates", "diff"})  # replies of up to a few MiB...
LARGE_AT_ONCE = 4  # ... of which this many are built at a time
REFUSALS_AUDITED = 10  # refused operator actions audited on one connection, which is then closed
GAVE_UP = "not carried out: its client had hung up before the daemon read it (it gave up waiting)"
Handler = Callable[..., Awaitable[Any]]  # an `op_<name>`: (request, *, who) -> the result


@dataclass
class Peer:
    """One connection's client: who it is, and how many operator actions it was refused."""

    principal: Principal
    refused: int = 0


def peer_uid(stream: SocketStream) -> tuple[int, int]:
    """(uid, pid) of the process on the other end of a unix socket (SO_PEERCRED)."""
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return uid, pid


_RAW: WeakKeyDictionary[SocketStream, socket.socket] = WeakKeyDictionary()  # each connection's socket


def _raw(stream: SocketStream) -> socket.socket:
    raw = _RAW.get(stream)
    if raw is None:
        raw = _RAW[stream] = stream.extra(SocketAttribute.raw_socket)  # (a lookup costs 15 us: once per connection)
    return raw


def _hung_up(stream: SocketStream) -> bool:
    """Whether the client has closed its end (POLLHUP): it waits for no reply. A client gives up on a daemon
    that was stopped or stuck (runtime/client.py); its request, read only now, would surprise it if done."""
    poller = select.poll()
    poller.register(_raw(stream).fileno(), 0)  # POLLHUP and POLLERR are reported whatever is asked
    return any(events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0))


async def _send(stream: SocketStream, data: bytes) -> None:
    """A reply; a client that does not take it within REPLY_SECONDS is disconnected (TimeoutError). Most
    replies fit the socket's buffer: written at once, without the stream's checkpoint and a timeout each."""
    raw = _raw(stream)
    try:
        sent = raw.send(data)  # non-blocking (anyio's sockets are); the client reads one reply at a time
    except BlockingIOError:
        sent = 0
    if sent < len(data):
        with anyio.fail_after(REPLY_SECONDS):
            await stream.send(data[sent:])


async def _drain_client(stream: SocketStream, scope: Any) -> None:
    """A subscriber only listens; when it hangs up, end the subscription."""
    try:
        while await stream.receive(1 << 16):
            pass
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    scope.cancel()


def _only_hangups(exc: BaseException) -> bool:
    """Whether an exception (group) is nothing but a client going away."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_hangups(e) for e in exc.exceptions)
    return isinstance(exc, (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError))


def _reply(rid: Any, *, result: Any = None, error: str | None = None, kind: str = "request") -> bytes:
    """A reply line: the result, or the error with its kind (see RequestError)."""
    if error is not None:
        return orjson.dumps({"id": rid, "ok": False, "error": error, "error_kind": kind}) + b"\n"
    return orjson.dumps({"id": rid, "ok": True, "result": result}, default=str) + b"\n"


def handlers(operations: Iterable[object]) -> dict[str, Handler]:
    """Every `op_<name>` of the operation objects, by name; a name two objects answer is a mistake."""
    table: dict[str, Handler] = {}
    for ops in operations:
        for attr in dir(ops):
            if attr.startswith("op_"):
                if attr[3:] in table:
                    raise ValueError(f"two operations answer {attr[3:]!r}")
                table[attr[3:]] = getattr(ops, attr)
    return table


class SocketServer:
    """Connections on the control socket, one request at a time, each answered by an `op_<name>` of the
    operation objects it was given (and its own `op_whois`)."""

    def __init__(self, operations: Iterable[object], registry: SessionRegistry, broadcaster: Broadcaster,
                 health: DaemonHealth, audit: AuditLog, hook_claims: HookClaims, *,
                 attached: Callable[[], list[str]], helpers: Callable[[], set[int]],
                 log: Callable[[str], None]) -> None:
        self.handlers = handlers([*operations, self])
        self.registry = registry
        self.broadcaster = broadcaster
        self.health = health
        self.audit = audit
        self.hook_claims = hook_claims
        self.attached = attached  # the attached sessions that have not ended
        self.helpers = helpers  # the daemon's own children that are no agents (its guardian)
        self.log = log
        self.connections = 0
        self._large_replies = anyio.CapacityLimiter(LARGE_AT_ONCE)

    async def accept(self, listener: Any) -> None:
        async def handle(stream: SocketStream) -> None:
            self.connections += 1
            try:
                if self.connections > MAX_CONNECTIONS:
                    await _send(stream, _reply(None, error=f"refused: {MAX_CONNECTIONS} connections are open "
                                                           "already; close some and try again", kind="daemon"))
                    return
                await self.connection(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError, TimeoutError):
                pass
            except Exception as exc:  # noqa: BLE001 - one client's trouble must never end the daemon
                if not _only_hangups(exc):
                    self.log(f"connection failed: {type(exc).__name__}: {exc}")
            finally:
                self.connections -= 1
                with anyio.CancelScope(shield=True):
                    await stream.aclose()

        while True:
            try:
                await listener.serve(handle)
            except Exception as exc:  # noqa: BLE001 - e.g. EMFILE: too many open files
                self.log(f"accepting connections failed ({type(exc).__name__}: {exc}); retrying in 1 s")
                await anyio.sleep(1.0)

    async def connection(self, stream: SocketStream) -> None:
        """One client: its requests answered in turn until it hangs up (or its connection becomes a subscription)."""
        uid, pid = peer_uid(stream)
        if uid != os.getuid():
            await _send(stream, _reply(None, error=f"refused: uid {uid} is not the owner of this daemon "
                                                  f"(uid {os.getuid()})", kind="refused"))
            return
        peer = Peer(await self._classify(pid, uid))
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

    async def _classify(self, pid: int, uid: int) -> Principal:
        """Who a process is, and which session (if any) it runs inside; see principal.py. The claims are taken
        here; the walk up /proc runs in a worker thread, so a deep or heavy ancestry never holds the loop."""
        claims = [claim for session in self.registry.sessions.values() if not session.final
                  for claim in session.claims()]
        claims += self.hook_claims.claims()
        locators = daemon_locators(claims, os.getpid(), self.helpers(), self.attached(), bool(self.hook_claims))
        return await anyio.to_thread.run_sync(classify, pid, uid, locators)

    async def op_whois(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Who a process is to this daemon (`pid`; absent: the asking client itself), judged as a client of
        this socket is: the one-line refusal an operator action would get, or None for a person. The web
        console and `--host` ask it, so that every door decides by the same facts."""
        pid = req.get("pid")
        if pid is None:
            principal = who
        elif not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise RequestError("'pid' must be a process id")
        else:
            owner = process_owner(pid)
            stranger = owner_refusal(pid, owner)
            if stranger or owner is None:
                return {"pid": pid, "refusal": stranger, "inside": None}
            principal = await self._classify(pid, owner)
        inside = principal.inside.session if principal.inside else principal.claimed
        return {"pid": principal.pid, "refusal": principal.refusal("operate"), "inside": inside}

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
        handler = self.handlers.get(op)
        if handler is None:
            await _send(stream, _reply(rid, error=f"unknown op {op[:40]!r}"))
            return False
        if operator_op(op) and _hung_up(stream):  # its client gave up waiting (this daemon was stopped): not done,
            await self.audit.refused(who, op, request, GAVE_UP)  # whoever it was (a process gone by now is not traced)
            return True
        if operator_op(op):  # judged again now: a process adopted or claimed since it connected is inside
            peer.principal = await self._classify(peer.principal.pid, peer.principal.uid)
            who = peer.principal.acting_as(request.get("client"), request.get("agent_session"))
        refusal = who.refusal(op)
        if refusal:  # a supervised agent acting as the operator: recorded, and nothing else happens
            peer.refused += 1
            if peer.refused <= REFUSALS_AUDITED:  # a flood of attempts on one connection fills no audit log
                await self.audit.refused(who, op, request, refusal)
            await _send(stream, _reply(rid, error=refusal, kind="refused"))
            return peer.refused >= REFUSALS_AUDITED  # ... and the connection is closed after them
        try:
            if op in LARGE_REPLIES:  # a few at a time: what one such reply holds is bounded, so is their sum
                async with self._large_replies:
                    await _send(stream, _reply(rid, result=await handler(request, who=who)))
                return False
            result = await handler(request, who=who)
        except RequestError as exc:
            if operator_op(op) and not isinstance(exc, AlreadyAudited):  # every refused action is in the log
                await self.audit.refused(who, op, request, f"refused: {exc}")
            await _send(stream, _reply(rid, error=str(exc), kind=exc.kind))
            return False
        except StoreError as exc:
            await _send(stream, _reply(rid, error=f"the store could not be read: {exc}", kind="daemon"))
            return False
        except Exception as exc:  # noqa: BLE001 - a bug must not take the daemon down
            self.log(f"error in {op}: {type(exc).__name__}: {exc}")
            await _send(stream, _reply(rid, error=f"internal error in {op}: {type(exc).__name__}: {exc}",
                                       kind="daemon"))
            return False
        await _send(stream, _reply(rid, result=result))
        # the connection ends with the daemon; a shutdown `unless_live` that named live sessions stops nothing
        return op in ("shutdown", "handover") and isinstance(result, dict) and bool(result.get("stopping"))

    async def _subscribe(self, stream: SocketStream, request: dict[str, Any], rid: Any) -> None:
        sessions = request.get("sessions")
        registry = self.registry
        try:
            wanted = {await registry.resolve(s) for s in sessions} if isinstance(sessions, list) else None
        except RequestError as exc:
            await _send(stream, _reply(rid, error=str(exc), kind=exc.kind))
            return
        broadcaster = self.broadcaster
        sub = Subscriber(wanted, bool(request.get("events", False)), broadcaster.budget)
        snapshot = [registry.snapshot(s) for s in registry.all_sessions(wanted)]
        sub.first(_reply(rid, result={"sessions": snapshot, "daemon": self.health(),  # sent by the pump, so a
                                      "heartbeat": broadcaster.heartbeat}))  # reader that never reads it is cut
        broadcaster.add(sub)  # off too; nothing falls in between
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_client, stream, tg.cancel_scope)
                await sub.pump(stream)
                tg.cancel_scope.cancel()
        finally:
            broadcaster.remove(sub)
