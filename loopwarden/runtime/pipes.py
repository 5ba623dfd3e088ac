"""An agent's pipes as the loop's protocols.

Output (`OutputPipe`): read through the loop's callbacks, each chunk split and its lines taken at once, in
order, with no task switch per line. What must wait (a stop, the store's backpressure, a bug of ours)
pauses the reading and leaves the rest to the session's pump task, which catches up and resumes it
(runtime/session/reader.py `OutputReader`).

Input (`InputPipe`): the agent's stdin, opened by the session's writer task with the first line it sends
(most agents are never written to), each write waiting while the pipe is full."""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Awaitable, Callable
from typing import BinaryIO, Final, Protocol

import anyio

from ..supervisor.lines import LineSplitter, LongLine, Oversized
from .keeper_channels import KeptStream

SYNC_LINES: Final = 64  # lines of one chunk taken in the read callback; the rest by the pump task
Item = bytes | Oversized | LongLine
Later = Callable[[], Awaitable[None]]  # what a line left for the pump task to await before the next
Take = Callable[[Item], Later | None]  # one line judged and carried out; or what must be awaited first


class Backlog(Protocol):
    """The store as a pipe sees it: reading pauses while it is behind."""

    @property
    def over_backlog(self) -> bool: ...


class OutputPipe(asyncio.Protocol):
    """One of the agent's output pipes (stdout or stderr), its lines handed to `take` as they come."""

    def __init__(self, splitter: LineSplitter[bytes | Oversized] | LineSplitter[Item], take: Take,
                 wake: Callable[[], None], records: Backlog | None, progress: Callable[[], None] | None = None,
                 partial: Callable[[], None] | None = None) -> None:
        self.splitter = splitter
        self.take = take
        self.progress = progress  # called once per chunk whose lines were taken (stdout: publishing the session)
        self.partial = partial  # ... or for a chunk that only carried a line on
        self._wake = wake  # the pump task's
        self._records = records
        self.transport: asyncio.ReadTransport | None = None
        self.held = False  # reading is paused until the pump task has caught up
        self.items: deque[Item] = deque()  # what the pump task is to take, in order
        self.later: Later | None = None  # ... after awaiting this first
        self.failed: Exception | None = None  # a bug of ours, for the pump task to raise
        self.eof = False
        self.bytes_read = 0

    async def connect(self, file: BinaryIO | KeptStream) -> None:
        """Start reading `file` (the loop's transport then owns it), or a kept agent's stream."""
        if isinstance(file, KeptStream):
            file.connect(self)
            return
        await asyncio.get_running_loop().connect_read_pipe(lambda: self, file)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self.transport = transport

    def data_received(self, chunk: bytes) -> None:
        """A chunk read (the loop's callback): its lines taken now, in order, up to what must wait."""
        self.bytes_read += len(chunk)
        try:
            items = self.splitter.feed(chunk)
        except Exception as exc:  # noqa: BLE001 - a bug of ours (splitter, decoder): as below, never the loop's
            self.failed = exc
            self.hold()
            return
        if self.held:  # a chunk read before the pause took effect: the task takes it after the held ones
            self.items.extend(items)
            return
        take = self.take
        try:
            for i, item in enumerate(items):
                if i == SYNC_LINES:  # a long chunk (the agent is ahead): the task takes the rest, yielding between
                    self.items.extend(items[i:])
                    self.hold()
                    return
                later = take(item)
                if later is not None:
                    self.later = later
                    self.items.extend(items[i + 1:])
                    self.hold()
                    return
        except Exception as exc:  # noqa: BLE001 - a bug of ours: the task raises it, and the session stops the agent
            self.failed = exc
            self.hold()
            return
        finally:
            if items and self.progress is not None:
                self.progress()  # once per chunk at most
            elif not items and self.partial is not None:
                self.partial()
        records = self._records
        if records is not None and records.over_backlog:
            self.hold()  # the store is behind: the agent's pipe fills meanwhile

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._wake()

    def hold(self) -> None:
        """Stop reading until the pump task has caught up."""
        self.held = True
        if self.transport is not None:
            self.transport.pause_reading()
        self._wake()

    def resume(self) -> None:
        """The pump task has caught up: read on, unless the pipe has ended."""
        self.held = False
        if not self.eof and self.transport is not None:
            self.transport.resume_reading()

    @property
    def done(self) -> bool:
        """Ended, and nothing held is left to take."""
        return self.eof and not self.held


class InputPipe(asyncio.Protocol):
    """Our end of the agent's stdin: a write waits while the pipe is full (flow control) and fails once the
    agent has closed its end."""

    def __init__(self) -> None:
        self.paused = False
        self.lost = False
        self._transport: asyncio.WriteTransport | None = None
        self._resumed: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, fd: int) -> InputPipe:
        """A pipe over `fd`, which it owns from now on (closed with it)."""
        loop = asyncio.get_running_loop()
        _, pipe = await loop.connect_write_pipe(cls, os.fdopen(fd, "wb", buffering=0))
        return pipe

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        self._transport = transport

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._wake()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def write_now(self, data: bytes) -> bool:
        """Hand `data` to the kernel now, or queue it behind what waits (never waiting); False once closed."""
        transport = self._transport
        if transport is None or transport.is_closing() or self.lost:
            return False
        transport.write(data)
        return not transport.is_closing()

    @property
    def buffered(self) -> int:
        """Bytes written but not yet taken by the other end's socket or pipe."""
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    async def send(self, data: bytes) -> None:
        """Write `data`, waiting while the pipe is full (as anyio's stream did: a checkpoint when it was not).
        Raises ConnectionResetError when the agent's end is closed, also when the write itself found it so
        (the transport then closes at once but reports the loss only later)."""
        transport = self._transport
        assert transport is not None
        paused = self.paused
        if transport.is_closing() or self.lost:
            raise ConnectionResetError("the agent's stdin is closed")
        transport.write(data)
        if transport.is_closing():  # the write met a closed pipe (EPIPE): the line did not reach the agent
            raise ConnectionResetError("the agent's stdin is closed")
        while self.paused and not self.lost:
            self._resumed = asyncio.get_running_loop().create_future()
            await self._resumed
        if self.lost:
            raise ConnectionResetError("the agent's stdin is closed")
        if not paused:
            await anyio.lowlevel.cancel_shielded_checkpoint()

    def _wake(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None
