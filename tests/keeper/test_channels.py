"""The daemon's side of the keeper's output connection over a real socket pair: frames to their readers however
the reads cut them, a paused reader's frames held and no credit given for them, EOF after what was held."""

from __future__ import annotations

import asyncio
import socket

import pytest

from loopwarden.runtime import keeper_wire as wire
from loopwarden.runtime.keeper_channels import CREDIT_AFTER, Channels, KeptStream

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Reader(asyncio.Protocol):
    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = False
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data

    def eof_received(self) -> bool:
        self.eof = True
        return False


async def until(condition: object, what: str) -> None:
    for _ in range(500):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def opened() -> tuple[Channels, socket.socket]:
    ours, keepers = socket.socketpair()
    channels = Channels()
    await asyncio.get_running_loop().create_connection(lambda: channels, sock=ours)
    keepers.sendall(b"\n")
    await channels.ready
    return channels, keepers


def frame(number: int, data: bytes) -> bytes:
    return wire.OUT_FRAME.pack(number, len(data)) + data


def credits(sock: socket.socket) -> dict[int, int]:
    sock.setblocking(False)
    got: dict[int, int] = {}
    try:
        data = sock.recv(1 << 16)
    except BlockingIOError:
        return got
    for at in range(0, len(data), wire.CREDIT_FRAME.size):
        number, size = wire.CREDIT_FRAME.unpack_from(data, at)
        got[number] = got.get(number, 0) + size
    return got


async def test_frames_reach_their_readers_however_the_reads_cut_them() -> None:
    channels, keeper = await opened()
    one, two = channels.new(), channels.new()
    first, second = Reader(), Reader()
    one.connect(first)
    two.connect(second)
    wire_bytes = b"".join(frame(n, f"{n}:{i};".encode()) for i in range(300) for n in (one.number, two.number))
    wire_bytes += wire.OUT_FRAME.pack(two.number, wire.EOF_LENGTH)
    for at in range(0, len(wire_bytes), 7):  # every frame cut somewhere, each piece read on its own
        keeper.sendall(wire_bytes[at:at + 7])
        await asyncio.sleep(0)
    await until(lambda: second.eof, "the second channel's EOF")
    await until(lambda: len(first.data) == len(b"".join(f"1:{i};".encode() for i in range(300))), "the first's bytes")
    assert bytes(first.data) == b"".join(f"1:{i};".encode() for i in range(300))
    assert bytes(second.data) == b"".join(f"2:{i};".encode() for i in range(300))
    assert not first.eof


async def test_a_paused_reader_holds_its_frames_without_credit_then_ends_after_them() -> None:
    channels, keeper = await opened()
    stream = channels.new()
    reader = Reader()
    stream.connect(reader)
    await asyncio.sleep(0)
    stream.pause_reading()
    chunk = b"x" * (CREDIT_AFTER // 2)
    keeper.sendall(frame(stream.number, chunk) * 3 + wire.OUT_FRAME.pack(stream.number, wire.EOF_LENGTH))
    await until(lambda: len(stream._held) == 3 * len(chunk), "the frames held")
    assert not reader.data and not reader.eof
    assert credits(keeper) == {}  # nothing was read: no credit
    stream.resume_reading()
    await until(lambda: reader.eof, "the EOF after the held frames")
    assert bytes(reader.data) == chunk * 3
    await until(lambda: credits(keeper).get(stream.number) == 3 * len(chunk), "credit for what was read")


async def test_frames_of_a_channel_no_longer_read_are_dropped_and_a_huge_frame_ends_the_connection() -> None:
    channels, keeper = await opened()
    stream = channels.new()
    reader = Reader()
    stream.connect(reader)
    stream.close()
    keeper.sendall(frame(stream.number, b"late") + frame(99, b"nobody's"))
    live = channels.new()
    second = Reader()
    live.connect(second)
    keeper.sendall(frame(live.number, b"ok"))
    await until(lambda: second.data == b"ok", "the live channel's bytes")
    assert not reader.data
    keeper.sendall(wire.OUT_FRAME.pack(live.number, wire.MAX_OUT_FRAME + 1))
    await until(lambda: channels.lost, "the connection closed")
    await until(lambda: second.eof, "the channel's end")
    assert isinstance(live, KeptStream)
