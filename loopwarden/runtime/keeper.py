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
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Final

from . import keeper_wire as wire
from .kept import KeptAgent
from .principal import classify, descends_from, marked_ancestor
from .reaper import become_subreaper

RESTARTS: Final = 3  # daemons started again after the daemon died, before the agents are stopped
DAEMON_WAIT: Final = 20.0  # seconds a started daemon has to say hello
HANDOVER_WAIT: Final = 60.0  # seconds the next daemon has after a planned `bye`
IDLE_EXIT: Final = 2.0  # seconds with no agent and no daemon before the keeper exits
TICK: Final = 0.2  # the longest wait of the loop (deadlines are checked this often)
FIRST_LINE_WAIT: Final = 2.0  # seconds a new connection has to say what it is

Handler = Callable[[int], None]


class Keeper:
    """The keeper's loop: the socket, its connections, the agents' pipes, their deadlines and exits."""

    def __init__(self, runtime: Path, *, restarts: int = RESTARTS, daemon_wait: float = DAEMON_WAIT,
                 handover_wait: float = HANDOVER_WAIT) -> None:
        self.runtime = runtime
        self.restarts, self.daemon_wait, self.handover_wait = restarts, daemon_wait, handover_wait
        self.sel = selectors.DefaultSelector()
        self._masks: dict[int, int] = {}
        self._handlers: dict[int, Handler] = {}
        self.agents: dict[str, KeptAgent] = {}
        self.by_pid: dict[int, KeptAgent] = {}
        self.control: socket.socket | None = None
        self._control_in = bytearray()
        self._control_out = bytearray()
        self.daemon: dict[str, Any] | None = None  # how to start a daemon again (its hello)
        self.waiting_since: float | None = time.monotonic()  # no daemon attached since
        self.wait_for: float = self.daemon_wait  # ... for this long before starting one (or giving up)
        self.started_daemons: list[int] = []
        self.attempts = 0
        self.giving_up = False
        self._idle_since: float | None = None
        self._pending: dict[socket.socket, tuple[bytearray, float]] = {}  # connections before their first line
        self._frames: dict[socket.socket, wire.FrameReader] = {}
        self._ticked = 0.0
        self.generation = 0  # bumped for each daemon attached: its streams carry it
        self.listener = self._listen()
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        self._wake = wake_r
        signal.set_wakeup_fd(wake_w.fileno())
        self._wake_w = wake_w
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self._stop_all("the keeper was told to stop"))
        self._want(self.listener.fileno(), selectors.EVENT_READ, self._accept)
        self._want(wake_r.fileno(), selectors.EVENT_READ, self._reap)

    def _listen(self) -> socket.socket:
        path = self.runtime / wire.SOCKET_NAME
        path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is the owner's only from the start
        try:
            listener.bind(str(path))
        finally:
            os.umask(old)
        listener.listen(socket.SOMAXCONN)  # a daemon taking 200 sessions up opens 600 streams at once
        listener.setblocking(False)
        return listener

    # ---- the selector, registrations changed only when they change ----------------------------
    def _want(self, fd: int, mask: int, handler: Handler | None = None) -> None:
        """Wait for `mask` on `fd` (0: for nothing), calling its handler (given once, kept until forgotten)."""
        if handler is not None:
            self._handlers[fd] = handler
        current = self._masks.get(fd, 0)
        if mask == current:
            return
        if not mask:
            self.sel.unregister(fd)
            del self._masks[fd]
        elif current:
            self.sel.modify(fd, mask, self._handlers[fd])
            self._masks[fd] = mask
        else:
            self.sel.register(fd, mask, self._handlers[fd])
            self._masks[fd] = mask

    def _forget_fd(self, fd: int | None) -> None:
        if fd is None:
            return
        if fd in self._masks:
            self.sel.unregister(fd)
            del self._masks[fd]
        self._handlers.pop(fd, None)

    # ---- the loop ---------------------------------------------------------------------------
    def run(self) -> None:
        while not self._should_exit():
            for key, mask in self.sel.select(self._timeout()):
                key.data(mask)
            self._tick()
        self.listener.close()
        (self.runtime / wire.SOCKET_NAME).unlink(missing_ok=True)

    def _timeout(self) -> float:
        return max(0.0, self._ticked + TICK - time.monotonic())

    def _should_exit(self) -> bool:
        if self.agents or self.control is not None:
            self._idle_since = None
            return False
        now = time.monotonic()
        self._idle_since = self._idle_since or now
        return now - self._idle_since >= IDLE_EXIT

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._ticked < TICK:
            return
        self._ticked = now
        for conn, (_, deadline) in list(self._pending.items()):
            if now > deadline:  # a connection that never said what it is
                del self._pending[conn]
                self._forget_fd(conn.fileno())
                conn.close()
        for agent in self.agents.values():
            agent.due(now)
        if self.control is None and self.agents and not self.giving_up:
            self._daemon_missing(now)
        for agent in list(self.agents.values()):
            if self.giving_up and agent.code is not None:
                self._drop(agent)  # no daemon will store the rest

    def _daemon_missing(self, now: float) -> None:
        """No daemon is attached: once the wait is over start one, until RESTARTS were tried; then stop the agents."""
        assert self.waiting_since is not None
        if now - self.waiting_since < self.wait_for:
            return
        if self.daemon is not None and self.attempts < self.restarts:
            self.attempts += 1
            self._start_daemon()
            self.waiting_since, self.wait_for = now, self.daemon_wait
            return
        self._stop_all("no daemon came back")

    def _start_daemon(self) -> None:
        """Start the daemon again, as its hello said, logging where it logs."""
        assert self.daemon is not None
        log = subprocess.DEVNULL
        path = self.daemon.get("log")
        try:
            if isinstance(path, str):
                log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            proc = subprocess.Popen(self.daemon["argv"], env=self.daemon.get("env"), cwd=self.daemon.get("cwd") or "/",
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                    close_fds=True)
        except (OSError, ValueError, TypeError):
            return
        finally:
            if log != subprocess.DEVNULL:
                os.close(log)
        self.started_daemons.append(proc.pid)

    def _stop_all(self, reason: str) -> None:
        self.giving_up = True
        for agent in self.agents.values():
            agent.end(reason)

    # ---- connections ----------------------------------------------------------------------
    def _accept(self, _mask: int) -> None:
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        refusal = self._refusal(conn)
        if refusal:
            with contextlib.suppress(OSError):
                conn.sendall(wire.encode({"error": refusal}))
            conn.close()
            return
        conn.setblocking(False)
        self._pending[conn] = (bytearray(), time.monotonic() + FIRST_LINE_WAIT)
        self._want(conn.fileno(), selectors.EVENT_READ, partial(self._first_line, conn))

    def _refusal(self, conn: socket.socket) -> str | None:
        """Why a peer may not talk to the keeper: another user, or a process of a kept agent (an agent never
        acts as the daemon); None for the operator's daemon."""
        pid, uid = _peer(conn)
        if uid != os.getuid():
            return "this keeper is another user's"
        principal = classify(pid, uid, [descends_from(os.getpid(), set(self.started_daemons)), marked_ancestor()])
        if principal.inside is not None:
            return "an agent's processes may not talk to its keeper"
        return None

    def _first_line(self, conn: socket.socket, _mask: int) -> None:
        """A new connection's first line says what it is; anything after it belongs to the stream it opens."""
        buffer, _ = self._pending[conn]
        try:
            data = conn.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        buffer += data
        end = buffer.find(b"\n")
        if end < 0 and data and len(buffer) < wire.MAX_LINE:
            return
        del self._pending[conn]
        self._forget_fd(conn.fileno())
        message = wire.decode(bytes(buffer[:end])) if end >= 0 else None
        rest = bytes(buffer[end + 1:])
        if message is None:
            conn.close()
        elif message.get("op") == "control":
            self._attach_control(conn, rest)
        elif message.get("op") == "attach":
            self._attach_stream(conn, message, rest)
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
        self.waiting_since = None
        self._want(conn.fileno(), selectors.EVENT_READ, self._on_control)
        if rest:
            self._control_lines(rest)

    def _attach_stream(self, conn: socket.socket, message: dict[str, Any], rest: bytes) -> None:
        agent = self.agents.get(str(message.get("sid")))
        stream = message.get("stream")
        if agent is None or self.control is None or message.get("generation") != self.generation:
            # (a stream an earlier daemon opened, read only after it died, must not feed the next one)
            conn.close()
            return
        if stream == "in":
            old = agent.stdin.conn
            if old is not None:
                self._forget_fd(old.fileno())
            agent.stdin.attach(conn)
            self._frames[conn] = wire.FrameReader()
            self._want(conn.fileno(), selectors.EVENT_READ, partial(self._on_stdin, agent))
            if rest:
                self._take_frames(agent, rest)
        elif stream in wire.STREAMS:
            out = agent.streams[stream]
            if out.conn is not None:
                self._forget_fd(out.conn.fileno())
            out.attach(conn, _int(message.get("from")))
        else:
            conn.close()
            return
        self._pump(agent)

    def _on_control(self, _mask: int) -> None:
        conn = self.control
        assert conn is not None
        if _mask & selectors.EVENT_WRITE:
            self._flush_control()
        if not _mask & selectors.EVENT_READ:
            return
        try:
            data = conn.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
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
        """The daemon went (or left): its streams close with it; the agents go on, their output kept."""
        conn = self.control
        if conn is None:
            return
        self._forget_fd(conn.fileno())
        conn.close()
        self.control = None
        for agent in self.agents.values():
            for stream in agent.streams.values():
                if stream.conn is not None:
                    self._forget_fd(stream.conn.fileno())
                stream.detach()
            self._close_stdin_conn(agent)
        if self.waiting_since is None:  # it died: start the next one at once, or give the agents the bound
            restart = self.daemon is not None and self.attempts < self.restarts
            self.waiting_since, self.wait_for = time.monotonic(), 0.0 if restart else self.daemon_wait

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
        self._want(conn.fileno(), mask)

    # ---- requests -------------------------------------------------------------------------
    def _request(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        handler = _OPS.get(str(op))
        try:
            reply = handler(self, message) if handler else {"error": f"unknown request {op!r}"}
        except (OSError, ValueError, TypeError, KeyError) as exc:
            reply = {"error": f"{op}: {exc}"}
        if "id" in message:
            self.send({"id": message["id"], **reply})

    def op_hello(self, message: dict[str, Any]) -> dict[str, Any]:
        daemon = message.get("daemon")
        if isinstance(daemon, dict) and isinstance(daemon.get("argv"), list):
            self.daemon = daemon
        self.attempts, self.giving_up = 0, False
        sessions = [agent.describe() for agent in self.agents.values()]
        return {"pid": os.getpid(), "generation": self.generation, "sessions": sessions}

    def op_bye(self, message: dict[str, Any]) -> dict[str, Any]:
        self.waiting_since, self.wait_for = time.monotonic(), self.handover_wait
        return {}

    def op_shutdown(self, message: dict[str, Any]) -> dict[str, Any]:
        """The daemon stops for good (stop-daemon): it is not started again, and what it left running is stopped."""
        self.daemon = None
        self._stop_all("the daemon stopped")
        for agent in list(self.agents.values()):
            if agent.code is not None:
                self._drop(agent)
        return {}

    def op_spawn(self, message: dict[str, Any]) -> dict[str, Any]:
        sid = str(message["sid"])
        if sid in self.agents:
            raise ValueError(f"session {sid} is kept already")
        agent = spawn(sid, [str(a) for a in message["argv"]], {str(k): str(v) for k, v in message["env"].items()},
                      message.get("cwd") or None, max_runtime=message.get("max_runtime"),
                      grace=float(message.get("grace") or 5.0))
        self.agents[sid] = agent
        self.by_pid[agent.pid] = agent
        for stream in agent.streams.values():
            assert stream.fd is not None
            self._want(stream.fd, selectors.EVENT_READ, partial(self._readable, agent))
        return {"pid": agent.pid}

    def op_signal(self, message: dict[str, Any]) -> dict[str, Any]:
        agent = self.agents[str(message["sid"])]
        agent.signal(int(message["sig"]), bool(message.get("group", True)))
        return {}

    def op_stored(self, message: dict[str, Any]) -> dict[str, Any]:
        agent = self.agents.get(str(message.get("sid")))
        if agent is None:
            return {}
        out = message.get("out")
        if isinstance(out, list) and len(out) == 2:
            agent.streams["out"].stored(_int(out[0]))
            agent.stdin.stored(_int(out[1]))
        agent.streams["err"].stored(_int(message.get("err")))
        self._pump(agent)
        return {}

    def op_take(self, message: dict[str, Any]) -> dict[str, Any]:
        """A new daemon takes a session up, having stored its stdout up to line `seq`: stdin frames an earlier
        daemon queued for later lines are dropped (it reads and judges those lines again, and answers them)."""
        agent = self.agents[str(message["sid"])]
        agent.stdin.taken(_int(message.get("seq")))
        agent.reported = False
        self._pump(agent)
        self._report_exits()
        return agent.describe()

    def op_release(self, message: dict[str, Any]) -> dict[str, Any]:
        agent = self.agents.get(str(message.get("sid")))
        if agent is not None:
            self._drop(agent)
        return {}

    # ---- the agents' pipes ----------------------------------------------------------------
    def _pump(self, agent: KeptAgent, read: bool = False) -> None:
        """Move what can move: the agent's output to its daemon connection, frames to its stdin; registrations
        follow what each side waits for."""
        for stream in agent.streams.values():
            if read and stream.fd is not None and stream.readable:
                fd = stream.fd
                stream.read()
                if stream.fd is None:
                    self._forget_fd(fd)  # (closed already: the selector lets go of it quietly)
            conn = stream.conn
            if conn is not None:
                fd = conn.fileno()
                if stream.wants_send:
                    stream.send()
                if stream.conn is None:
                    self._forget_fd(fd)  # the daemon went
                else:
                    self._want(fd, selectors.EVENT_WRITE if stream.wants_send else 0, partial(self._writable, agent))
            if stream.fd is not None:
                self._want(stream.fd, selectors.EVENT_READ if stream.readable else 0)
        stdin = agent.stdin
        if stdin.wants_write:
            held = stdin.fd
            stdin.write()
            if stdin.fd is None:
                self._forget_fd(held)
        if stdin.fd is not None:
            self._want(stdin.fd, selectors.EVENT_WRITE if stdin.wants_write else 0, partial(self._writable, agent))

    def _readable(self, agent: KeptAgent, _mask: int) -> None:
        self._pump(agent, read=True)

    def _writable(self, agent: KeptAgent, _mask: int) -> None:
        self._pump(agent)

    def _on_stdin(self, agent: KeptAgent, _mask: int) -> None:
        conn = agent.stdin.conn
        if conn is None:
            return
        try:
            data = conn.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close_stdin_conn(agent)
            return
        self._take_frames(agent, data)

    def _take_frames(self, agent: KeptAgent, data: bytes) -> None:
        conn = agent.stdin.conn
        assert conn is not None
        reader = self._frames[conn]
        for seq, payload in reader.feed(data):
            agent.stdin.queue(seq, payload)
        if reader.bad:
            self._close_stdin_conn(agent)
        self._pump(agent)

    def _close_stdin_conn(self, agent: KeptAgent) -> None:
        conn = agent.stdin.conn
        if conn is not None:
            self._forget_fd(conn.fileno())
            self._frames.pop(conn, None)
            conn.close()
            agent.stdin.conn = None

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
        self._report_exits()

    def _report_exits(self) -> None:
        for agent in self.agents.values():
            if agent.code is not None and not agent.reported and self.control is not None:
                agent.reported = True
                self.send({"op": "exited", "sid": agent.sid, "code": agent.code, "reason": agent.reason})

    def _drop(self, agent: KeptAgent) -> None:
        for stream in agent.streams.values():
            self._forget_fd(stream.fd)
            if stream.conn is not None:
                self._forget_fd(stream.conn.fileno())
        self._forget_fd(agent.stdin.fd)
        if agent.stdin.conn is not None:
            self._forget_fd(agent.stdin.conn.fileno())
        agent.close()
        self.agents.pop(agent.sid, None)
        self.by_pid.pop(agent.pid, None)


_OPS: dict[str, Callable[[Keeper, dict[str, Any]], dict[str, Any]]] = {
    "hello": Keeper.op_hello, "bye": Keeper.op_bye, "shutdown": Keeper.op_shutdown, "spawn": Keeper.op_spawn,
    "signal": Keeper.op_signal, "stored": Keeper.op_stored, "take": Keeper.op_take, "release": Keeper.op_release,
}


def spawn(sid: str, argv: list[str], env: dict[str, str], cwd: str | None, *, max_runtime: float | None,
          grace: float) -> KeptAgent:
    """Start an agent in a session and group of its own, its three pipes ours; raises OSError when it cannot."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe()
    try:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=in_r, stdout=out_w, stderr=err_w,
                                start_new_session=True, close_fds=True)
    except BaseException:
        for fd in (out_r, err_r, in_w):
            os.close(fd)
        raise
    finally:
        for fd in (out_w, err_w, in_r):
            os.close(fd)
    proc.returncode = 0  # the keeper reaps its children itself (waitpid(-1)): Popen must never wait for it
    for fd in (out_r, err_r, in_w):
        os.set_blocking(fd, False)
    return KeptAgent(sid, proc.pid, out_r, err_r, in_w, max_runtime=float(max_runtime) if max_runtime else None,
                     grace=grace)


def _peer(conn: socket.socket) -> tuple[int, int]:
    """The peer's pid and uid (-1, -1 when the kernel does not say)."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    except OSError:
        return -1, -1
    return int.from_bytes(creds[0:4], sys.byteorder), int.from_bytes(creds[4:8], sys.byteorder)


def _int(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def main(argv: list[str]) -> int:
    """`python -m loopwarden.runtime.keeper RUNTIME_DIR [--restarts N] [--daemon-wait S] [--handover-wait S]`: keep
    agents there, unless a keeper does already."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m loopwarden.runtime.keeper")
    parser.add_argument("runtime", type=Path)
    parser.add_argument("--restarts", type=int, default=RESTARTS)
    parser.add_argument("--daemon-wait", type=float, default=DAEMON_WAIT)
    parser.add_argument("--handover-wait", type=float, default=HANDOVER_WAIT)
    args = parser.parse_args(argv)
    if not args.runtime.is_dir():
        parser.error(f"{args.runtime} is not a directory")
    lock = os.open(args.runtime / "keeper.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # one keeper a profile: the daemon talks to the one that runs
    become_subreaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    Keeper(args.runtime, restarts=args.restarts, daemon_wait=args.daemon_wait,
           handover_wait=args.handover_wait).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
