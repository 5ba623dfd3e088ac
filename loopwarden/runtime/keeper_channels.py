"""The daemon's side of the keeper's output connection (kept_output.py is the keeper's): frames read in one
wake-up for many agents, each handed to its stream's reader as a pipe's bytes would be, and credit given back
for what a reader took. A reader that holds back (its session's store is behind) keeps its frames here, at most
the credit the keeper had; the other channels go on."""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any, Final

from . import keeper_wire as wire

CREDIT_AFTER: Final = wire.FIRST_CREDIT // 4  # bytes a channel's reader took before credit for them is given


class Channels(asyncio.Protocol):
    """The output connection: frames to their channels, credit back in one write per chunk read."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.channels: dict[int, KeptStream] = {}
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # the keeper's newline
        self._numbers = itertools.count(1)
        self._buffer = bytearray()
        self._owed: dict[int, int] = {}  # channel -> bytes its reader took that no credit was given for yet
        self._due: set[int] = set()  # channels owed CREDIT_AFTER or more
        self.lost = False

    def new(self) -> KeptStream:
        number = next(self._numbers)
        stream = self.channels[number] = KeptStream(self, number)
        return stream

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.ready.done():
            if not data.startswith(b"\n"):
                self._broken()
                return
            self.ready.set_result(None)
            data = data[1:]
        if self._buffer:  # (the rest of a frame cut by the last read)
            self._buffer += data
            data = bytes(self._buffer)
            self._buffer.clear()
        at = self._frames(data)
        if at < len(data):
            self._buffer += data[at:]
        if self._due:
            self.give_credit()

    def _frames(self, data: bytes) -> int:
        """Every whole frame of `data`, to its channel (a channel no longer read drops its frames); where the
        first frame not whole begins."""
        size = wire.OUT_FRAME.size
        unpack = wire.OUT_FRAME.unpack_from
        at, end = 0, len(data)
        channels = self.channels
        while end - at >= size:
            number, length = unpack(data, at)
            at += size
            if length == wire.EOF_LENGTH:
                stream = channels.get(number)
                if stream is not None:
                    stream.ended()
                continue
            if length > wire.MAX_OUT_FRAME:
                self._broken()
                return end
            if end - at < length:
                return at - size
            stream = channels.get(number)
            if stream is not None:
                stream.feed(data[at:at + length])
            at += length
        return at

    def owe(self, number: int, size: int) -> None:
        owed = self._owed.get(number, 0) + size
        self._owed[number] = owed
        if owed >= CREDIT_AFTER:
            self._due.add(number)

    def give_credit(self) -> None:
        """Credit for the channels whose readers took enough, in one write."""
        due, self._due = self._due, set()
        if not due or self.transport is None or self.transport.is_closing():
            return
        owed = self._owed
        self.transport.write(b"".join(wire.CREDIT_FRAME.pack(number, owed.pop(number)) for number in due
                                      if number in owed))

    def forget(self, number: int) -> None:
        self.channels.pop(number, None)
        self._owed.pop(number, None)
        self._due.discard(number)

    def _broken(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """The keeper went: every channel ends (what a held reader keeps is still read first)."""
        self.lost = True
        if not self.ready.done():
            self.ready.set_exception(ConnectionResetError("the keeper closed its output connection"))
        for stream in list(self.channels.values()):
            stream.ended()


def close_source(source: int | KeptStream) -> None:
    """An output stream no reader took: a kept agent's channel, or a pipe's descriptor."""
    if isinstance(source, KeptStream):
        source.close()
    else:
        os.close(source)


class KeptStream(asyncio.ReadTransport):
    """One kept agent's stdout or stderr as its reader sees it: a read transport over a channel, paused and
    resumed as a pipe's would be."""

    def __init__(self, channels: Channels, number: int) -> None:
        super().__init__()
        self.channels = channels
        self.number = number
        self.protocol: asyncio.Protocol | None = None
        self._held = bytearray()  # what came while paused (or before a reader was connected)
        self._paused = False
        self._eof = False
        self._closed = False

    def connect(self, protocol: asyncio.Protocol) -> None:
        """Hand the stream to its reader (what came before goes to it now)."""
        self.protocol = protocol
        protocol.connection_made(self)
        asyncio.get_running_loop().call_soon(self._deliver)

    def feed(self, data: bytes) -> None:
        protocol = self.protocol
        if self._paused or protocol is None or self._held:
            self._held += data
            return
        self.channels.owe(self.number, len(data))
        protocol.data_received(data)

    def ended(self) -> None:
        self._eof = True
        if not self._held:
            self._deliver()

    def _deliver(self) -> None:
        """What was held, then the end, while the reader reads."""
        protocol = self.protocol
        if protocol is None or self._paused or self._closed:
            return
        if self._held:
            data, self._held = bytes(self._held), bytearray()
            self.channels.owe(self.number, len(data))
            protocol.data_received(data)
            self.channels.give_credit()
            if self._paused or self._held:
                return
        if self._eof:
            self._closed = True
            self.channels.forget(self.number)
            protocol.eof_received()
            protocol.connection_lost(None)

    def pause_reading(self) -> None:
        self._paused = True

    def resume_reading(self) -> None:
        if self._paused:  # (what was held comes from the loop, as a pipe's bytes would)
            self._paused = False
            asyncio.get_running_loop().call_soon(self._deliver)

    def is_reading(self) -> bool:
        return not self._paused and not self._closed

    def is_closing(self) -> bool:
        return self._closed

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.channels.forget(self.number)
            if self.protocol is not None:
                self.protocol.connection_lost(None)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default
