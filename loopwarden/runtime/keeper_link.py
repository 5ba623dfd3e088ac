"""The daemon's side of the keeper (keeper.py): start it when none runs, say hello, ask it to start agents, open
their streams, tell it what is stored, and hear when an agent exits. Requests are answered in order; the link
never blocks the loop (a keeper that stops answering fails the request after REQUEST_WAIT)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import anyio

from ..paths import Paths
from . import keeper_wire as wire
from .client import serve_argv
from .keeper_channels import Channels, KeptStream

START_WAIT: Final = 10.0  # seconds a keeper we started has to open its socket
REQUEST_WAIT: Final = 10.0


class KeeperError(Exception):
    """The keeper could not be reached, or refused."""


class KeeperLink:
    """One daemon's control connection to its profile's keeper."""

    def __init__(self, runtime: Path, log: Callable[[str], None]) -> None:
        self.runtime = runtime
        self.log = log
        self.path = runtime / wire.SOCKET_NAME
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.pid: int | None = None
        self.generation = 0
        self.kept: list[dict[str, Any]] = []  # what the keeper held when we said hello
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._exits: dict[str, asyncio.Future[tuple[int, str | None]]] = {}
        self._listen: asyncio.Task[None] | None = None
        self.lost = False  # the connection closed under us
        self._told = bytearray()  # `tell` lines of this pass of the event loop, written together at its end
        self.answers_dropped = 0  # stdin lines an earlier daemon queued for lines the store never got
        self.channels: Channels | None = None  # the output connection (a keeper that has none: a stream each)
        self.spawn_fields: dict[str, Any] = {}  # what every spawn adds (a pod's: the user its agent runs as)

    # ---- connecting -----------------------------------------------------------------------
    async def open(self, daemon: dict[str, Any], *, start: bool = True) -> None:
        """Connect (starting a keeper when none answers, with `start`) and say hello; `daemon` is how to start a
        daemon again."""
        try:
            await self._connect()
        except OSError:
            if not start:
                raise
            log = daemon.get("log")
            self._start_keeper(Path(log) if isinstance(log, str) else None)
            with anyio.fail_after(START_WAIT):
                while True:
                    try:
                        await self._connect()
                        break
                    except OSError:
                        await anyio.sleep(0.02)
        self._listen = asyncio.get_running_loop().create_task(self._read_replies())
        reply = await self.request("hello", daemon=daemon)
        self.pid, self.generation, self.kept = reply.get("pid"), int(reply["generation"]), list(reply["sessions"])
        if reply.get("output") is True:
            try:
                await self._open_output()
            except (OSError, TimeoutError) as exc:
                self.log(f"the keeper's output connection could not be opened ({exc}): a connection per stream")

    async def _open_output(self) -> None:
        """The output connection every kept stream's bytes come on, taken once the keeper's newline says so."""
        channels = Channels()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_unix_connection(lambda: channels, str(self.path))
        try:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, wire.STREAM_BUFFER)
            transport.write(wire.encode({"op": "output", "generation": self.generation}))
            with anyio.fail_after(REQUEST_WAIT):
                await channels.ready
        except BaseException:
            transport.close()
            raise
        self.channels = channels

    async def _connect(self) -> None:
        reader, writer = await asyncio.open_unix_connection(str(self.path), limit=wire.MAX_LINE)
        writer.write(wire.encode({"op": "control"}))
        self.reader, self.writer = reader, writer

    def _start_keeper(self, log: Path | None) -> None:
        """A keeper of its own session (it outlives us), what it says on stderr in the daemon's log."""
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if log else subprocess.DEVNULL
        try:
            subprocess.Popen([sys.executable, "-m", "loopwarden.runtime.keeper", str(self.runtime)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out, start_new_session=True,
                             close_fds=True)
        finally:
            if out != subprocess.DEVNULL:
                os.close(out)

    async def _read_replies(self) -> None:
        assert self.reader is not None
        try:
            while line := await self.reader.readline():
                message = wire.decode(line) or {}
                if message.get("op") == "exited":
                    self._exited(message)
                    continue
                waiter = self._waiting.pop(message.get("id", -1), None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
        except (OSError, ValueError):
            pass
        self.lost = True
        self.log("the keeper closed its connection: kept agents run on, unsupervised until it is reached again")
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(KeeperError("the keeper closed its connection"))

    def _exited(self, message: dict[str, Any]) -> None:
        sid = str(message.get("sid"))
        code = message.get("code")
        future = self._exit_future(sid)
        if not future.done():
            future.set_result((code if isinstance(code, int) else -1, message.get("reason")))

    def _exit_future(self, sid: str) -> asyncio.Future[tuple[int, str | None]]:
        future = self._exits.get(sid)
        if future is None:
            future = self._exits[sid] = asyncio.get_running_loop().create_future()
        return future

    # ---- requests -------------------------------------------------------------------------
    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        if self.writer is None or self.lost:
            raise KeeperError("not connected to the keeper")
        rid = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        self._write_told()  # in the order they were made
        self.writer.write(wire.encode({"op": op, "id": rid, **fields}))
        try:
            with anyio.fail_after(REQUEST_WAIT):
                reply = await future
        except TimeoutError:
            raise KeeperError(f"the keeper did not answer {op} within {REQUEST_WAIT:g}s") from None
        finally:
            self._waiting.pop(rid, None)
        if "error" in reply:
            raise KeeperError(str(reply["error"]))
        return reply

    def tell(self, op: str, **fields: Any) -> None:
        """A request whose answer nobody waits for (what is stored). Those made in one pass of the event loop (the
        sessions whose lines one commit stored) go in one write, which the keeper reads in one wake-up."""
        if self.writer is not None and not self.lost:
            if not self._told:
                asyncio.get_running_loop().call_soon(self._write_told)
            self._told += wire.encode({"op": op, **fields})

    def _write_told(self) -> None:
        if self._told and self.writer is not None and not self.lost:
            self.writer.write(bytes(self._told))
        self._told.clear()

    async def spawn(self, sid: str, argv: list[str], env: dict[str, str], cwd: str | None, *,
                    max_runtime: float | None, grace: float) -> int:
        """Start an agent in the keeper; its pid. Raises OSError when it cannot start (as a local start would)."""
        try:
            reply = await self.request("spawn", sid=sid, argv=argv, env=env, cwd=cwd, max_runtime=max_runtime,
                                       grace=grace, **self.spawn_fields)
        except KeeperError as exc:
            raise OSError(str(exc)) from None
        return int(reply["pid"])

    async def attach(self, sid: str, stream: str, start: int = 0) -> int | KeptStream:
        """One of the agent's streams: stdout or stderr as a channel of the output connection, or (a keeper without
        one, and stdin) a connected socket, a file descriptor the caller owns."""
        channels = self.channels
        if channels is not None and channels.lost:
            self.log("the keeper's output connection closed: kept streams attached from now on a connection each")
            channels = self.channels = None
        if channels is not None and stream in wire.STREAMS:
            kept = channels.new()
            try:
                os.close(await self._attach(sid, stream, start, kept.number))
            except BaseException:
                kept.close()
                raise
            return kept
        return await self._attach(sid, stream, start)

    async def _attach(self, sid: str, stream: str, start: int, channel: int | None = None) -> int:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        if stream in wire.STREAMS and channel is None:  # a busy agent's output waits here, read in large chunks
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, wire.STREAM_BUFFER)
        loop = asyncio.get_running_loop()
        try:
            with anyio.fail_after(REQUEST_WAIT):
                while True:
                    try:
                        await loop.sock_connect(sock, str(self.path))
                        break
                    except BlockingIOError:  # its backlog is full: the keeper is accepting others
                        await anyio.sleep(0.01)
            message = {"op": "attach", "sid": sid, "stream": stream, "from": start, "generation": self.generation}
            if channel is not None:
                message["channel"] = channel
            await loop.sock_sendall(sock, wire.encode(message))
            if stream in wire.STREAMS:
                sock.shutdown(socket.SHUT_WR)  # nothing goes the other way
        except BaseException:
            sock.close()
            raise
        return sock.detach()

    async def exit_code(self, sid: str) -> tuple[int, str | None]:
        """Wait until the keeper says the agent exited: its exit code, and why the keeper ended it (if it did).
        A wait given up (a stop's grace) leaves the exit to the next wait: the future is shared, never cancelled."""
        return await asyncio.shield(self._exit_future(sid))

    async def take(self, sid: str, seq: int) -> dict[str, Any]:
        """Take a session up, its stdout stored up to line `seq` (frames queued for later lines are dropped, and
        counted in `answers_dropped`)."""
        before = next((_count(s.get("stdin_dropped")) for s in self.kept if s.get("sid") == sid), 0)
        reply = await self.request("take", sid=sid, seq=seq)
        self.answers_dropped += max(0, _count(reply.get("stdin_dropped")) - before)
        return reply

    def stored(self, sid: str, out: int, seq: int, err: int) -> None:
        """The agent's output is stored up to stdout offset `out` (line `seq`) and stderr offset `err`."""
        self.tell("stored", sid=sid, out=[out, seq], err=err)

    def consumed(self, sid: str, line: int, upto: int) -> None:
        """The daemon has read the agent's unfinished stdout line from offset `line` up to `upto`: once the line's
        start is stored, the keeper forgets what was read of it."""
        self.tell("consumed", sid=sid, line=line, upto=upto)

    def stored_lines(self, sid: str, seq: int) -> None:
        """The agent's stdout lines up to `seq` are stored: the lines for its stdin that answer them may go."""
        self.tell("stored", sid=sid, seq=seq)

    def release(self, sid: str) -> None:
        self.tell("release", sid=sid)
        self._exits.pop(sid, None)

    async def bye(self) -> None:
        """This daemon leaves on purpose: the keeper waits for the next one."""
        with contextlib.suppress(KeeperError):
            await self.request("bye")

    async def aclose(self) -> None:
        self._write_told()
        self.lost = True  # closed here: nothing more is told over it
        if self._listen is not None:
            self._listen.cancel()
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
        if self.channels is not None and self.channels.transport is not None:
            self.channels.transport.close()


def daemon_command(paths: Paths) -> dict[str, Any]:
    """How the keeper starts this daemon again: the same program, environment and directory, its log where a
    daemon started by the command line logs (its environment is the daemon's own: the keeper keeps it in memory
    only, and never writes it anywhere)."""
    env = {k: v for k, v in os.environ.items() if k != "LOOPWARDEN_SUCCEED"}  # (it replaces no running daemon)
    return {"argv": serve_argv(), "env": env, "cwd": os.getcwd(),
            "log": str(paths.daemon_log)}


def _count(value: Any) -> int:
    """A count a keeper said (a pod's keeper is the agent's neighbour): 0 unless a whole number from 0 up."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
