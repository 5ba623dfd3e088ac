"""A blocking client of the keeper's socket for its tests: what a daemon says, one request at a time."""

from __future__ import annotations

import itertools
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopwarden.runtime import keeper_wire as wire
from tests.support.waiting import wait_for


def start_keeper(runtime: Path, *extra: str) -> subprocess.Popen[bytes]:
    """A keeper for `runtime`, its socket up before this returns."""
    proc = subprocess.Popen([sys.executable, "-m", "loopwarden.runtime.keeper", str(runtime), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    wait_for(lambda: (runtime / wire.SOCKET_NAME).exists(), 15, "the keeper's socket")
    return proc


def connect(runtime: Path, first: dict[str, Any]) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(runtime / wire.SOCKET_NAME))
    sock.sendall(wire.encode(first))
    return sock


class Control:
    """The daemon's control connection, as a test drives it."""

    def __init__(self, runtime: Path) -> None:
        self.runtime = runtime
        self.sock = connect(runtime, {"op": "control"})
        self.file = self.sock.makefile("rb")
        self.ids = itertools.count(1)
        self.unasked: list[dict[str, Any]] = []  # `exited` and the like, in order
        self.generation = 0

    def hello(self, **daemon: object) -> list[dict[str, Any]]:
        reply = self.ask("hello", daemon={"argv": ["true"], **daemon})
        self.generation = reply["generation"]
        return list(reply["sessions"])

    def attach(self, sid: str, stream: str, start: int = 0) -> socket.socket:
        return connect(self.runtime, {"op": "attach", "sid": sid, "stream": stream, "from": start,
                                      "generation": self.generation})

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        rid = next(self.ids)
        self.sock.sendall(wire.encode({"op": op, "id": rid, **fields}))
        while True:
            message = self.next()
            if message.get("id") == rid:
                return message
            self.unasked.append(message)

    def next(self) -> dict[str, Any]:
        line = self.file.readline()
        assert line, "the keeper closed the control connection"
        message = wire.decode(line)
        assert message is not None
        return message

    def exited(self, sid: str) -> dict[str, Any]:
        """The keeper's word that `sid` exited (waiting for it)."""
        while True:
            for message in self.unasked:
                if message.get("op") == "exited" and message.get("sid") == sid:
                    return message
            self.unasked.append(self.next())

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def read_until(sock: socket.socket, needle: bytes, limit: int = 1 << 24) -> bytes:
    data = bytearray()
    while needle not in data and len(data) < limit:
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        data += chunk
    return bytes(data)


def read_to_eof(sock: socket.socket) -> bytes:
    data = bytearray()
    while chunk := sock.recv(1 << 16):
        data += chunk
    return bytes(data)


class OutputConnection:
    """The daemon's output connection, as a test drives it: frames read into each channel's bytes, credit given
    only when the test says."""

    def __init__(self, control: Control) -> None:
        self.control = control
        self.sock = connect(control.runtime, {"op": "output", "generation": control.generation})
        assert self.sock.recv(1) == b"\n", "the keeper did not take the output connection"
        self.received: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.given: dict[int, int] = {}  # credit given back per channel
        self._buffer = bytearray()
        self._numbers = itertools.count(1)

    def attach(self, sid: str, stream: str, start: int = 0) -> int:
        """A channel for the agent's `stream` from `start` on: its number."""
        number = next(self._numbers)
        self.received[number] = bytearray()
        connect(self.control.runtime, {"op": "attach", "sid": sid, "stream": stream, "from": start,
                                       "generation": self.control.generation, "channel": number}).close()
        return number

    def credit(self, number: int, size: int) -> None:
        self.sock.sendall(wire.CREDIT_FRAME.pack(number, size))

    def read(self) -> bool:
        """One read of the connection, its whole frames sorted into channels; False at its end."""
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            return False
        self._buffer += chunk
        size = wire.OUT_FRAME.size
        while len(self._buffer) >= size:
            number, length = wire.OUT_FRAME.unpack_from(self._buffer)
            if length == wire.EOF_LENGTH:
                self.ended.add(number)
                del self._buffer[:size]
                continue
            if len(self._buffer) < size + length:
                break
            self.received[number] += self._buffer[size:size + length]
            del self._buffer[:size + length]
        return True

    def read_until(self, done: Callable[[], bool], *, credit: frozenset[int] = frozenset()) -> None:
        """Read until `done()`, giving the channels in `credit` back what they sent, as they send it."""
        for number in credit:
            self.given.setdefault(number, 0)
        while True:
            for number in credit:
                got = len(self.received[number])
                if got > self.given[number]:
                    self.credit(number, got - self.given[number])
                    self.given[number] = got
            if done():
                return
            assert self.read(), "the keeper closed the output connection"

    def close(self) -> None:
        self.sock.close()
