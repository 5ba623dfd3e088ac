"""The link to a pod's keeper: a private unix socket here whose every connection is carried to the keeper's
socket in the pod by a command run there through the Kubernetes API (keeper_bridge.py), as kubectl exec does.

So the daemon's side of the keeper (keeper_link.py) talks to a pod's keeper as it talks to the local one, and
nothing listens on the network: not here, not in the pod. Each exec is a websocket whose messages carry a
channel byte (0 stdin, 1 stdout, 2 stderr, 3 the command's status) before the data.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import aiohttp

from ..keeper_wire import SOCKET_NAME

CHUNK: Final = 64 << 10
STDIN, STDOUT, STDERR, STATUS = 0, 1, 2, 3


class Forward:
    """Serves `directory/keeper.sock` (the directory 0700, the socket 0600) for as long as the session needs it."""

    def __init__(self, directory: Path, open_exec: Callable[[], Any], log: Callable[[str], None]) -> None:
        self.directory = directory
        self.path = directory / SOCKET_NAME
        self.open_exec = open_exec
        self.log = log
        self.server: asyncio.AbstractServer | None = None
        self.failure: str | None = None  # why the last connection could not be carried, in a few words
        self._links: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self.path.unlink(missing_ok=True)
        old = os.umask(0o177)
        try:
            self.server = await asyncio.start_unix_server(self._serve, str(self.path))
        finally:
            os.umask(old)

    async def aclose(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for task in list(self._links):
            task.cancel()
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.directory.rmdir()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not _from_us(writer):  # another process of this user, an agent of a local session maybe: refused
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._links.add(task)
        try:
            async with await self.open_exec() as ws:
                await _splice(reader, writer, ws, self.log)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self.failure = _refusal(exc)
            self.log(f"a connection to the pod's keeper failed: {self.failure}")
        except asyncio.CancelledError:
            pass  # the forward closed (aclose): this connection ends with it
        finally:
            self._links.discard(task)
            writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await writer.wait_closed()


async def _splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ws: Any,
                  log: Callable[[str], None]) -> None:
    """Local bytes to the command's stdin, its stdout to the local side, until either ends: the local side's end
    (the daemon closed the connection) ends the command, the command's end (the keeper closed) closes the local
    side. The exec protocol has no half-close, and the daemon's side of the keeper makes none to a keeper that
    sends output on one connection, as a pod's does."""
    up = asyncio.ensure_future(_up(reader, ws))
    down = asyncio.ensure_future(_down(ws, writer, log))
    try:
        await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (up, down):
            task.cancel()
        for task in (up, down):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _up(reader: asyncio.StreamReader, ws: Any) -> None:
    while data := await reader.read(CHUNK):
        await ws.send_bytes(bytes([STDIN]) + data)


async def _down(ws: Any, writer: asyncio.StreamWriter, log: Callable[[str], None]) -> None:
    async for message in ws:
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
            return
        if message.type != aiohttp.WSMsgType.BINARY or not message.data:
            continue
        channel, data = message.data[0], message.data[1:]
        if channel == STDOUT and data:
            writer.write(data)
            await writer.drain()
        elif channel == STDERR and data:
            log(f"the pod's bridge said: {data[:200].decode('utf-8', 'replace').strip()}")


def _from_us(writer: asyncio.StreamWriter) -> bool:
    """Whether the peer is this daemon: its connections to a pod's keeper are the only ones the forward carries
    (they run commands in the pod with the operator's credentials)."""
    sock = writer.get_extra_info("socket")
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return False
    pid, _uid, _gid = struct.unpack("3i", creds)
    return bool(pid == os.getpid())


def _refusal(exc: BaseException) -> str:
    """Why an exec failed, in words: the API's answer when it refused (403: RBAC lacks pods/exec)."""
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        why = {403: "forbidden: the Role needs get and create on pods/exec",
               404: "the pod or its container is gone"}.get(status, "refused")
        return f"the API answered the exec with HTTP {status} ({why})"
    return str(exc)[:200] or type(exc).__name__
