"""Talking to the daemon over its unix socket (used by the CLI and the console).

Every wait on the daemon is bounded, so a daemon that is stopped (SIGSTOP) or stuck costs a client
one line, never a hang: connecting (CONNECT_TIMEOUT), each reply (LOOPWARDEN_TIMEOUT, 30 s, plus what
a slow op legitimately takes: `reply_bound`), and a subscription's silence (that bound, and at least
three of the daemon's heartbeats: a quiet daemon sends one every few seconds).
"""

from __future__ import annotations

import math
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ..paths import Paths, private_dir
from .principal import env_claim, operator_op

CONNECT_TIMEOUT = 10.0  # seconds to be accepted (a unix socket's backlog accepts even for a stopped daemon)
START_TIMEOUT = 10.0
TIMEOUT_ENV = "LOOPWARDEN_TIMEOUT"  # seconds to wait for each reply, and for a subscription's silence
REPLY_TIMEOUT = 30.0  # ... when it is not set
SLOW_OPS = {"prune": 120.0, "notify_test": 120.0, "continue": 65.0}  # seconds more for ops that work before they answer
SILENT_BEATS = 3  # heartbeats a subscription may miss before the daemon counts as not answering
HEARTBEAT = "heartbeat"  # the kind of the daemon's keep-alive record; never handed to a subscription's reader


class DaemonError(Exception):
    """The daemon is unreachable or refused a request; the message is one line for a person. `kind`:
    "daemon" (unreachable, or it cannot do it now), "request" (what was asked is wrong), "refused"."""

    def __init__(self, message: str, kind: str = "daemon") -> None:
        super().__init__(message)
        self.kind = kind


class DaemonTimeout(DaemonError):
    """The daemon did not answer within its bound: stopped, stuck or overloaded (the message says which)."""

    def __init__(self, message: str, short: str) -> None:
        super().__init__(message)
        self.short = short  # a few words for a status line: "daemon not answering (pid 4242 is stopped)"


def reply_timeout(env: Mapping[str, str] | None = None) -> float:
    """Seconds to wait for a reply: LOOPWARDEN_TIMEOUT (a number, `2.5` or `30s`), else REPLY_TIMEOUT."""
    raw = (os.environ if env is None else env).get(TIMEOUT_ENV, "").strip()
    if not raw:
        return REPLY_TIMEOUT
    try:
        value = float(raw.removesuffix("s"))
    except ValueError:
        value = math.nan
    if not (0 < value < 1e9):
        raise DaemonError(f"{TIMEOUT_ENV}={raw[:40]!r} is not a number of seconds above 0 (e.g. 30)", "request")
    return value


def reply_bound(op: str, fields: Mapping[str, Any], timeout: float) -> float:
    """Seconds to wait for the reply to `op`: `timeout`, plus what the op takes on purpose (a hook's hold)."""
    if op == "hook_wait":
        hold = fields.get("hold")
        if isinstance(hold, (int, float)) and not isinstance(hold, bool) and 0 < hold < 1e9:
            return timeout + hold
    return timeout + SLOW_OPS.get(op, 0.0)


class Client:
    """A blocking, line-oriented client; one request at a time, each reply awaited within its bound."""

    def __init__(self, sock: socket.socket, name: str = "cli", claim: str | None = None, *,
                 timeout: float = REPLY_TIMEOUT, host: str | None = None, paths: Paths | None = None) -> None:
        self.sock = sock
        self.name = name
        self.claim = claim  # the session our environment says we run inside: the daemon then refuses operator ops
        self.file = sock.makefile("rb")
        self.timeout = timeout
        self.host = host  # a daemon reached over ssh (--host): named by its host, its pid is not ours to see
        self.paths = paths
        self._id = 0

    @classmethod
    def connect(cls, paths: Paths, *, autostart: bool = True, name: str = "cli", host: str | None = None) -> Client:
        """Connect, starting a daemon in the background when none answers (as tmux does). A daemon that
        listens but does not accept (a full backlog: stopped long enough) is said so, never started twice."""
        paths.socket  # noqa: B018 - raises SocketPathTooLong (one line) before anything starts
        claim = env_claim(os.environ, paths.socket)
        timeout = reply_timeout()
        options: dict[str, Any] = {"timeout": timeout, "host": host, "paths": paths}
        try:
            return cls(_connect(paths, timeout), name, claim, **options)
        except TimeoutError:
            raise _not_accepting(paths, host, min(CONNECT_TIMEOUT, timeout)) from None
        except OSError:
            if not autostart:
                raise DaemonError(f"no daemon is running (socket {paths.socket}); 'loopwarden serve', 'run' or "
                                  "the console starts one") from None
        start_daemon(paths)
        deadline = time.monotonic() + START_TIMEOUT
        last: OSError | None = None
        while time.monotonic() < deadline:
            try:
                return cls(_connect(paths, timeout), name, claim, **options)
            except TimeoutError:
                raise _not_accepting(paths, host, min(CONNECT_TIMEOUT, timeout)) from None
            except OSError as exc:
                last = exc
                time.sleep(0.05)
        raise DaemonError(f"the daemon did not start within {START_TIMEOUT:.0f}s ({last}); see {paths.daemon_log}")

    def request(self, op: str, **fields: Any) -> Any:
        self._id += 1
        message = {"id": self._id, "op": op, "client": self.name, **fields}
        if self.claim:
            message["agent_session"] = self.claim
        bound = reply_bound(op, fields, self.timeout)
        try:
            self.sock.settimeout(bound)  # per write and per read: a long reply that keeps coming is not cut
            self.sock.sendall(orjson.dumps(message) + b"\n")
            line = self.file.readline()
        except TimeoutError:
            # the daemon drops an operator action whose client hung up before it was read (server.py)
            after = "; this request is dropped, not carried out, if it had not read it yet" if operator_op(op) else ""
            raise self.unresponsive(f"did not answer within {bound:g}s", after) from None
        except OSError as exc:
            raise DaemonError(f"lost the connection to the daemon ({exc})") from None
        if not line:
            raise DaemonError("the daemon closed the connection")
        reply = orjson.loads(line)
        if not reply.get("ok"):
            kind = reply.get("error_kind")
            raise DaemonError(str(reply.get("error")), kind if kind in ("request", "refused") else "daemon")
        return reply.get("result")

    def subscribe(self, sessions: list[str] | None = None,
                  events: bool = False) -> tuple[Any, Iterator[dict[str, Any]]]:
        """Switch this connection to a subscription: (initial snapshot, iterator of updates). The daemon's
        heartbeats are not handed on; when nothing at all comes for `silence` seconds (the reply bound, and
        at least SILENT_BEATS heartbeats) the iterator raises DaemonTimeout. A daemon that sends no
        heartbeat (an older one, over --host) is waited for without a bound, as before."""
        first = self.request("subscribe", sessions=sessions, events=events)
        beat = first.get("heartbeat") if isinstance(first, dict) else None
        silence = (max(self.timeout, SILENT_BEATS * beat)
                   if isinstance(beat, (int, float)) and not isinstance(beat, bool) and beat > 0 else None)
        self.sock.settimeout(silence)

        def updates() -> Iterator[dict[str, Any]]:
            try:
                for line in self.file:
                    message = orjson.loads(line)
                    if message.get("kind") != HEARTBEAT:
                        yield message
            except TimeoutError:
                raise self.unresponsive(f"sent nothing for {silence:g}s, not even its heartbeat") from None

        return first, updates()

    def unresponsive(self, what: str, after: str = "") -> DaemonTimeout:
        """The one line for a daemon that `what` (did not answer within 30s), what to do about it, then `after`."""
        if self.host is not None or self.paths is None:
            return _unresponsive(what, None, self.host, None, after)
        pid = _peer_pid(self.sock)  # the listener's pid: the daemon's, unless the socket is a forward (ssh's)
        ours = pid is not None and pid == _lock_pid(self.paths)
        return _unresponsive(what, pid if ours else None, None, self.paths.daemon_log if ours else None, after)

    def close(self) -> None:
        """Close; a thread blocked reading a subscription on this client is woken, not deadlocked."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
            self.file.close()
        except OSError:
            pass

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _connect(paths: Paths, timeout: float = REPLY_TIMEOUT) -> socket.socket:
    """A connection to the daemon's socket; TimeoutError when it listens but accepts none within the bound
    (a unix socket whose backlog is full answers EAGAIN at once: tried again until then)."""
    bound = min(CONNECT_TIMEOUT, timeout)
    deadline = time.monotonic() + bound
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(bound)
        try:
            sock.connect(str(paths.socket))
            return sock
        except BlockingIOError:
            sock.close()
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no connection accepted within {bound:g}s") from None
            time.sleep(0.05)
        except OSError:
            sock.close()
            raise


def _peer_pid(sock: socket.socket) -> int | None:
    """The pid of the process listening on the other end (SO_PEERCRED; Linux): the daemon's."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    pid = struct.unpack("3i", creds)[0]
    return pid if pid > 0 else None


def _lock_pid(paths: Paths) -> int | None:
    """The pid the daemon wrote into its lock file (a daemon that has not accepted us has no other name)."""
    try:
        return int(paths.lock.read_text()[:32].strip())
    except (OSError, ValueError):
        return None


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP, a job-control stop, a tracer's stop)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] in (b"T", b"t")


def _unresponsive(what: str, pid: int | None, host: str | None, log: Path | None, after: str = "") -> DaemonTimeout:
    longer = f"{TIMEOUT_ENV}=SECONDS waits longer"
    if host is not None:
        return DaemonTimeout(f"host {host}'s daemon {what}: it, or the ssh connection to it, is stopped, stuck or "
                             f"overloaded ({longer}){after}", "daemon not answering")
    if pid and _stopped(pid):
        return DaemonTimeout(f"the daemon (pid {pid}) {what}: it is stopped; 'kill -CONT {pid}' resumes it{after}",
                             f"daemon not answering (pid {pid} is stopped: kill -CONT {pid})")
    name = f"the daemon (pid {pid})" if pid else "the daemon"
    where = f"its log: {log}; " if log else ""
    return DaemonTimeout(f"{name} {what}: it may be stuck or overloaded ({where}{longer}){after}",
                         f"daemon not answering (pid {pid})" if pid else "daemon not answering")


def _not_accepting(paths: Paths, host: str | None, bound: float) -> DaemonTimeout:
    """A daemon whose socket takes no connection within `bound`: it listens, so none is started."""
    return _unresponsive(f"did not accept a connection within {bound:g}s", None if host else _lock_pid(paths),
                         host, None if host else paths.daemon_log)


def serve_argv() -> list[str]:
    """How a daemon of this installation is started (by a client, or again by the keeper)."""
    return [sys.executable, "-m", "loopwarden", "serve"]


SUCCEED_ENV = "LOOPWARDEN_SUCCEED"  # a daemon started to replace the one with this pid: it waits for its lock


def start_daemon(paths: Paths, succeed: int | None = None) -> None:
    """Start `loopwarden serve` detached, logging to the data directory; with `succeed`, one that replaces the
    daemon of that pid as soon as it has exited (started while that one stops: its start-up overlaps the stop)."""
    private_dir(paths.data)
    log = os.open(paths.daemon_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        env = {**os.environ, **({SUCCEED_ENV: str(succeed)} if succeed else {})}
        subprocess.Popen(serve_argv(), stdin=subprocess.DEVNULL, stdout=log,
                         stderr=log, start_new_session=True, close_fds=True, env=env)
    finally:
        os.close(log)


def daemon_pid(paths: Paths, name: str = "cli") -> int | None:
    """The pid of the daemon answering on `paths`' socket, or None when none answers (it has no agents either)."""
    try:
        with Client.connect(paths, autostart=False, name=name) as client:
            pid = client.request("ping").get("pid")
    except (DaemonError, OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) else None
