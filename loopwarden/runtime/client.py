"""Talking to the daemon over its unix socket (used by the CLI and the console)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import orjson

from ..paths import Paths, private_dir
from .principal import env_claim

CONNECT_TIMEOUT = 10.0
START_TIMEOUT = 10.0


class DaemonError(Exception):
    """The daemon is unreachable or refused a request; the message is one line for a person. `kind`:
    "daemon" (unreachable, or it cannot do it now), "request" (what was asked is wrong), "refused"."""

    def __init__(self, message: str, kind: str = "daemon") -> None:
        super().__init__(message)
        self.kind = kind


class Client:
    """A blocking, line-oriented client; one request at a time."""

    def __init__(self, sock: socket.socket, name: str = "cli", claim: str | None = None) -> None:
        self.sock = sock
        self.name = name
        self.claim = claim  # the session our environment says we run inside: the daemon then refuses operator ops
        self.file = sock.makefile("rb")
        self._id = 0

    @classmethod
    def connect(cls, paths: Paths, *, autostart: bool = True, name: str = "cli") -> Client:
        """Connect, starting a daemon in the background when none answers (as tmux does)."""
        paths.socket  # noqa: B018 - raises SocketPathTooLong (one line) before anything starts
        claim = env_claim(os.environ, paths.socket)
        try:
            return cls(_connect(paths), name, claim)
        except OSError:
            if not autostart:
                raise DaemonError(f"no daemon is running (socket {paths.socket}); 'loopwarden serve', 'run' or "
                                  "the console starts one") from None
        start_daemon(paths)
        deadline = time.monotonic() + START_TIMEOUT
        last: OSError | None = None
        while time.monotonic() < deadline:
            try:
                return cls(_connect(paths), name, claim)
            except OSError as exc:
                last = exc
                time.sleep(0.05)
        raise DaemonError(f"the daemon did not start within {START_TIMEOUT:.0f}s ({last}); see {paths.daemon_log}")

    def request(self, op: str, **fields: Any) -> Any:
        self._id += 1
        message = {"id": self._id, "op": op, "client": self.name, **fields}
        if self.claim:
            message["agent_session"] = self.claim
        try:
            self.sock.sendall(orjson.dumps(message) + b"\n")
            line = self.file.readline()
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
        """Switch this connection to a subscription: (initial snapshot, iterator of updates)."""
        first = self.request("subscribe", sessions=sessions, events=events)

        def updates() -> Iterator[dict[str, Any]]:
            for line in self.file:
                yield orjson.loads(line)

        return first, updates()

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


def _connect(paths: Paths) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        sock.connect(str(paths.socket))
    except OSError:
        sock.close()
        raise
    sock.settimeout(None)
    return sock


def start_daemon(paths: Paths) -> None:
    """Start `loopwarden serve` detached, logging to the data directory."""
    private_dir(paths.data)
    log = os.open(paths.daemon_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        env = {**os.environ}
        subprocess.Popen([sys.executable, "-m", "loopwarden", "serve"], stdin=subprocess.DEVNULL, stdout=log,
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
