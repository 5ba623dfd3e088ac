"""The keeper: one small process per profile that holds the launched agents, so the daemon can die and come back.

The daemon judges; the keeper only keeps. It starts each agent (in a process group and session of its own, the
agent's pipes its own), keeps what the agent writes until the daemon says it is stored (so a daemon killed in the
middle of a line loses nothing: the next one is sent the same bytes again), lets a line for the agent's stdin
through only once the line it answers is stored, enforces each agent's max_runtime on its own, and reaps its
agents and their orphans (a child subreaper).

When the daemon's control connection closes without a `bye`, the keeper starts the daemon again (the command the
daemon gave in its `hello`), up to RESTARTS times, each given DAEMON_WAIT seconds to say hello; a `bye` (an
upgrade: `loopwarden restart-daemon`) gives the next daemon HANDOVER_WAIT seconds first. Only when no daemon comes
back are the agents stopped: SIGTERM, their grace, SIGKILL. It exits when it holds no agent and no daemon is
attached. The wire protocol: keeper_wire.py. Run as `python -m loopwarden.runtime.keeper RUNTIME_DIR`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from functools import partial
from pathlib import Path
from typing import Any, Final

from . import keeper_wire as wire
from .keeper_revival import DAEMON_WAIT, HANDOVER_WAIT, RESTARTS, Revival
from .keeper_requests import Requests
from .kept import Gathering, KeptAgent, OutStream, Registrations
from .keeper_input import InputSide
from .keeper_output import OutputSide
from .kept_output import Channel
from .principal import classify, descends_from, marked_ancestor
from .reaper import become_subreaper

IDLE_EXIT: Final = 2.0  # seconds with no agent and no daemon before the keeper exits
TICK: Final = 0.2  # the longest wait of the loop (deadlines are checked this often)
FIRST_LINE_WAIT: Final = 2.0  # seconds a new connection has to say what it is


class Keeper:
    """The keeper's loop: the socket, its connections, the agents' pipes, their deadlines and exits."""

    def __init__(self, runtime: Path, revival: Revival) -> None:
        self.runtime = runtime
        self.revival = revival
        self.fds = Registrations()
        self.requests = Requests(self)
        self.agents: dict[str, KeptAgent] = {}
        self.by_pid: dict[int, KeptAgent] = {}
        self.control: socket.socket | None = None
        self._control_in = bytearray()
        self._control_out = bytearray()
        self._idle_since: float | None = None
        self._pending: dict[socket.socket, tuple[bytearray, float]] = {}  # connections before their first line
        self._ticked = 0.0
        self.gathering = Gathering()
        self.outputs = OutputSide(self.fds, self.agents, receive)
        self.inputs = InputSide(self.fds, receive, self.pump)
        self.offers_output = True  # hello offers the output connection (as a keeper before it did not, when off)
        self.stopping = False  # SIGTERM: it exits once its agents are gone
        self.generation = 0  # bumped for each daemon attached: its streams carry it
        self._draining: int | None = None  # the generation of a daemon that just went, whose streams are taken
        self.first_wait = IDLE_EXIT  # seconds with no agent before the first daemon attaches (a pod's keeper waits)
        self.listener = listen(runtime / wire.SOCKET_NAME)
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        self._wake = wake_r
        signal.set_wakeup_fd(wake_w.fileno())
        self._wake_w = wake_w
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self._told_to_stop())
        self.fds.want(self.listener.fileno(), selectors.EVENT_READ, self._accept)
        self.fds.want(wake_r.fileno(), selectors.EVENT_READ, self._reap)

    # ---- the loop ---------------------------------------------------------------------------
    def run(self) -> None:
        while not self._should_exit():
            try:
                self.fds.wait(self._timeout())
                self.outputs.flush()
                self._tick()
                self.gathering.pause()
            except Exception:  # noqa: BLE001 - a bug of ours must not end the agents' pipes: said, and survived
                traceback.print_exc()
                time.sleep(0.01)
        self.listener.close()
        (self.runtime / wire.SOCKET_NAME).unlink(missing_ok=True)

    def _timeout(self) -> float:
        if self.outputs.ready:
            return 0.0
        return max(0.0, self._ticked + TICK - time.monotonic())

    def _should_exit(self) -> bool:
        if self.agents:
            self._idle_since = None
            return False
        if self.stopping:  # SIGTERM: the agents are gone, whether a daemon is attached or not
            return True
        if self.control is not None:
            self._idle_since = None
            return False
        if self.revival.given_up:  # told to stop (or no daemon came back): nothing more to wait for
            return True
        now = time.monotonic()
        self._idle_since = self._idle_since or now
        return now - self._idle_since >= (self.first_wait if self.generation == 0 else IDLE_EXIT)

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._ticked < TICK:
            return
        self._ticked = now
        for conn, (_, deadline) in list(self._pending.items()):
            if now > deadline:  # a connection that never said what it is
                del self._pending[conn]
                self.fds.forget(conn.fileno())
                conn.close()
        for agent in self.agents.values():
            agent.due(now)
        if self.control is None and self.agents and self.revival.due(now):
            self.stop_all("no daemon came back")
        for agent in list(self.agents.values()):
            if self.revival.given_up and agent.code is not None:
                self.drop(agent)  # no daemon will store the rest

    def _told_to_stop(self) -> None:
        """SIGTERM: the agents are stopped, no daemon is started again, and the keeper exits once they are gone."""
        self.revival.never_again()
        self.stopping = True
        self.stop_all("the keeper was told to stop")

    def stop_all(self, reason: str) -> None:
        for agent in self.agents.values():
            agent.end(reason)

    # ---- connections ----------------------------------------------------------------------
    def _accept(self, _mask: int) -> None:
        """Every connection waiting in the backlog (a daemon taking sessions up opens many at once)."""
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            refusal = self._refusal(conn)
            if refusal:
                with contextlib.suppress(OSError):
                    conn.sendall(wire.encode({"error": refusal}))
                conn.close()
                continue
            conn.setblocking(False)
            self._pending[conn] = (bytearray(), time.monotonic() + FIRST_LINE_WAIT)
            self.fds.want(conn.fileno(), selectors.EVENT_READ, partial(self._first_line, conn))

    def _refusal(self, conn: socket.socket) -> str | None:
        """Why a peer may not talk to the keeper: another user, or a process of a kept agent (an agent never
        acts as the daemon); None for the operator's daemon."""
        pid, uid = _peer(conn)
        if uid != os.getuid():
            return "this keeper is another user's"
        principal = classify(pid, uid, [descends_from(os.getpid(), set(self.revival.started)), marked_ancestor()])
        if principal.inside is not None:
            return "an agent's processes may not talk to its keeper"
        return None

    def _first_line(self, conn: socket.socket, _mask: int) -> None:
        """A new connection's first line says what it is; anything after it belongs to the stream it opens."""
        buffer, _ = self._pending[conn]
        data = receive(conn)
        if data is None:
            return
        buffer += data
        end = buffer.find(b"\n")
        if end < 0 and data and len(buffer) < wire.MAX_LINE:
            return
        del self._pending[conn]
        self.fds.forget(conn.fileno())
        message = wire.decode(bytes(buffer[:end])) if end >= 0 else None
        rest = bytes(buffer[end + 1:])
        if message is None:
            conn.close()
        elif message.get("op") == "control":
            self._attach_control(conn, rest)
        elif message.get("op") == "attach":
            self._attach_stream(conn, message, rest)
        elif message.get("op") == "output" and self._current(message.get("generation")):
            self.outputs.attach(conn, self.generation)
        else:
            conn.close()

    def _attach_control(self, conn: socket.socket, rest: bytes) -> None:
        if self.control is not None:  # one daemon at a time
            with contextlib.suppress(OSError):
                conn.send(wire.encode({"error": "another daemon is attached to this keeper"}))
            conn.close()
            return
        self.control, self._control_in, self._control_out = conn, bytearray(), bytearray()
        self.generation += 1
        self.revival.attached()
        self.fds.want(conn.fileno(), selectors.EVENT_READ, self._on_control)
        if rest:
            self._control_lines(rest)

    def _attach_stream(self, conn: socket.socket, message: dict[str, Any], rest: bytes) -> None:
        agent = self.agents.get(str(message.get("sid")))
        stream = message.get("stream")
        generation = message.get("generation")
        live = self.control is not None or self._draining == generation
        if agent is None or not live or generation != self.generation:
            # (a stream an earlier daemon opened, read only after it died, must not feed the next one)
            conn.close()
            return
        if stream == "in":
            self.inputs.attach(agent, conn, self.generation, rest)
        elif stream in wire.STREAMS:
            out = agent.streams[stream]
            carrier = self.outputs.carrier(conn, message)
            if carrier is None:
                return
            if out.conn is not None:
                self.fds.forget(out.conn.fileno())
            out.attach(carrier, wire.count(message.get("from")))
            out.generation = self.generation
        else:
            conn.close()
            return
        self.pump(agent)

    def _on_control(self, _mask: int) -> None:
        conn = self.control
        if conn is None:
            return
        if _mask & selectors.EVENT_WRITE:
            self._flush_control()
        if not _mask & selectors.EVENT_READ:
            return
        data = receive(conn)
        if data is None:
            return
        if not data:
            self._control_closed()
            return
        self._control_lines(data)

    def _control_lines(self, data: bytes) -> None:
        self._control_in += data
        while (end := self._control_in.find(b"\n")) >= 0:
            line = bytes(self._control_in[:end])
            del self._control_in[:end + 1]
            self._request(wire.decode(line) or {})
            if self.control is None:
                return
        if len(self._control_in) > wire.MAX_LINE:
            self._control_closed()

    def _control_closed(self) -> None:
        """The daemon went (or left): its streams close with it; the agents go on, their output kept. Streams it
        opened just before it went are taken first, as its own (one may carry an answer to a stored line)."""
        conn = self.control
        if conn is None:
            return
        self.fds.forget(conn.fileno())
        conn.close()
        self.control = None
        self.outputs.closed()
        self.revival.left(planned=False)
        self._draining = self.generation
        self._accept(0)
        for pending in list(self._pending):
            self._first_line(pending, 0)
        self._draining = None
        for agent in self.agents.values():
            for stream in agent.streams.values():
                if stream.conn is not None and not self._current(stream.generation):
                    self.fds.forget(stream.conn.fileno())
                    stream.detach()
            if agent.stdin.conn is not None and not self._current(agent.stdin.generation):
                self.inputs.drain(agent)
                self.inputs.close(agent)

    def _current(self, generation: object) -> bool:
        """Whether a stream opened by daemon `generation` belongs to the daemon attached now (a new one may have come
        while the last one's streams were taken)."""
        return self.control is not None and generation == self.generation

    def send(self, message: dict[str, Any]) -> None:
        if self.control is None:
            return
        self._control_out += wire.encode(message)
        self._flush_control()

    def _flush_control(self) -> None:
        conn = self.control
        assert conn is not None
        try:
            if self._control_out:
                del self._control_out[:conn.send(self._control_out)]
        except BlockingIOError:
            pass
        except OSError:
            self._control_closed()
            return
        mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._control_out else 0)
        self.fds.want(conn.fileno(), mask)

    # ---- requests -------------------------------------------------------------------------
    def _request(self, message: dict[str, Any]) -> None:
        reply = self.requests.answer(message)
        if "id" in message:
            self.send({"id": message["id"], **reply})

    # ---- the agents' pipes ----------------------------------------------------------------
    def on_output(self, agent: KeptAgent, stream: OutStream, _mask: int) -> None:
        """The agent wrote (the per-event path): read it, pass it on at once, wait for the daemon if it is behind."""
        fd = stream.fd
        if fd is None:
            return
        self.gathering.writers.add(agent.sid)  # (the per-event path: no call more than needed)
        if stream.read_and_carry():
            return
        if stream.fd is None:
            self.fds.forget(fd)
        elif not stream.readable:
            self.fds.want(fd, 0)  # the daemon has not stored enough: the agent waits in its write
        if stream.conn is not None and not stream.blocked:  # (blocked: it goes when the daemon has read)
            self._send(agent, stream)

    def _send(self, agent: KeptAgent, stream: OutStream) -> None:
        conn = stream.conn
        assert conn is not None
        fd = conn.fileno()
        more = stream.send()
        if stream.conn is None:
            self.fds.forget(fd)  # the daemon went
        elif more:
            stream.blocked = True
            if isinstance(conn, Channel):
                conn.output.waiting[conn.number] = partial(self.pump, agent)
            else:
                self.fds.want(fd, selectors.EVENT_WRITE, partial(self._writable, agent))
        elif stream.blocked:
            stream.blocked = False
            self.fds.want(fd, 0)

    def pump(self, agent: KeptAgent) -> None:
        """Move what can move after the daemon attached, stored or sent something: the agent's output to its
        connection, frames to its stdin; registrations follow what each side waits for."""
        for stream in agent.streams.values():
            if stream.conn is not None:
                self._send(agent, stream)
            if stream.fd is not None:
                self.fds.want(stream.fd, selectors.EVENT_READ if stream.readable else 0)
        stdin = agent.stdin
        if stdin.wants_write:
            held = stdin.fd
            stdin.write()
            if stdin.fd is None:
                self.fds.forget(held)
        if stdin.fd is not None:
            self.fds.want(stdin.fd, selectors.EVENT_WRITE if stdin.wants_write else 0, partial(self._writable, agent))
        if stdin.conn is not None:
            self.fds.want(stdin.conn.fileno(), selectors.EVENT_READ if stdin.wants_frames else 0)

    def _writable(self, agent: KeptAgent, _mask: int) -> None:
        self.pump(agent)

    def _reap(self, _mask: int) -> None:
        try:
            while self._wake.recv(4096):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            agent = self.by_pid.pop(pid, None)
            if agent is not None:
                agent.exited(status)
        self.report_exits()

    def report_exits(self) -> None:
        for agent in self.agents.values():
            if agent.code is not None and not agent.reported and self.control is not None:
                agent.reported = True
                self.send({"op": "exited", "sid": agent.sid, "code": agent.code, "reason": agent.reason})

    def drop(self, agent: KeptAgent) -> None:
        for stream in agent.streams.values():
            self.fds.forget(stream.fd)
            if stream.conn is not None:
                self.fds.forget(stream.conn.fileno())
        self.fds.forget(agent.stdin.fd)
        if agent.stdin.conn is not None:
            self.fds.forget(agent.stdin.conn.fileno())
        agent.close()
        self.agents.pop(agent.sid, None)
        self.by_pid.pop(agent.pid, None)


def listen(path: Path) -> socket.socket:
    """The keeper's socket, the owner's alone from its creation (a stale one is replaced). It is bound and
    listening under a private name first, then renamed into place: whoever sees the path can connect."""
    building = path.with_name(f".{path.name}.{os.getpid()}")
    building.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(building))
    finally:
        os.umask(old)
    try:
        listener.listen(socket.SOMAXCONN)  # a daemon taking 200 sessions up opens 600 streams at once
        os.replace(building, path)
    except OSError:
        listener.close()
        building.unlink(missing_ok=True)
        raise
    listener.setblocking(False)
    return listener


def receive(conn: socket.socket) -> bytes | None:
    """What a non-blocking connection has: None when nothing yet, b"" when it closed (or failed)."""
    try:
        return conn.recv(1 << 16)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


def _peer(conn: socket.socket) -> tuple[int, int]:
    """The peer's pid and uid (-1, -1 when the kernel does not say)."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    except OSError:
        return -1, -1
    return int.from_bytes(creds[0:4], sys.byteorder), int.from_bytes(creds[4:8], sys.byteorder)



def main(argv: list[str]) -> int:
    """`python -m loopwarden.runtime.keeper RUNTIME_DIR [--restarts N] [--daemon-wait S] [--handover-wait S]
    [--streams-only]`: keep agents there, unless a keeper does already."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m loopwarden.runtime.keeper")
    parser.add_argument("runtime", type=Path)
    parser.add_argument("--restarts", type=int, default=RESTARTS)
    parser.add_argument("--daemon-wait", type=float, default=DAEMON_WAIT)
    parser.add_argument("--handover-wait", type=float, default=HANDOVER_WAIT)
    parser.add_argument("--streams-only", action="store_true", help="offer no output connection, as an older keeper")
    parser.add_argument("--first-wait", type=float, default=IDLE_EXIT,
                        help="seconds it waits, holding no agent, for its first daemon (a pod's keeper is started "
                             "before its daemon can reach it)")
    args = parser.parse_args(argv)
    if not args.runtime.is_dir():
        parser.error(f"{args.runtime} is not a directory")
    os.chmod(args.runtime, 0o700)  # its socket's folder the owner's alone (a pod's, made by the cluster, is not)
    lock = os.open(args.runtime / "keeper.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # one keeper a profile: the daemon talks to the one that runs
    become_subreaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    keeper = Keeper(args.runtime, Revival(restarts=args.restarts, daemon_wait=args.daemon_wait,
                                          handover_wait=args.handover_wait))
    keeper.offers_output = not args.streams_only
    keeper.first_wait = args.first_wait
    keeper.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
