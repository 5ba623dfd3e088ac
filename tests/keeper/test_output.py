"""The keeper's output connection, its bound: a full connection takes no more bytes from any stream, and a
stream's offsets never move back, however far past the bound the frame headers put it."""

from __future__ import annotations

import socket

from loopwarden.runtime import keeper_wire as wire
from loopwarden.runtime.kept import OutStream
from loopwarden.runtime.kept_output import PENDING, Output


def test_past_its_bound_the_output_takes_nothing_and_no_offset_moves_back() -> None:
    ours, daemons = socket.socketpair()  # the daemon side reads nothing: every frame stays pending
    ours.setblocking(False)
    output = Output(ours, 1)
    for number in (1, 2, 3, 4, 5):
        output.channel(number)
        output.credit[number] = PENDING  # (as if the daemon had given that much)
    assert output.carry(1, bytearray(PENDING), 0, PENDING - 100) == PENDING - 100
    room = PENDING - len(output.pending)
    assert output.carry(2, bytearray(1000), 0, 1000) == room  # the room left, its header on top
    assert len(output.pending) > PENDING
    assert output.carry(3, bytearray(b"abcdefghij"), 0, 10) == 0
    stream = OutStream(-1)
    stream.held += b"abcdefghij"
    stream.attach(output.channel(4), 0)
    assert stream.send() is True and stream.sent == 0  # it waits; nothing was framed for it
    output.end(5)
    before = len(output.pending)
    assert stream.send() is True and stream.sent == 0 and len(output.pending) == before
    ours.close()
    daemons.close()


def test_every_frame_put_is_whole() -> None:
    ours, daemons = socket.socketpair()
    ours.setblocking(False)
    output = Output(ours, 1)
    channel = output.channel(7)
    stream = OutStream(-1)
    stream.held += b"x" * 5000
    stream.attach(channel, 0)
    assert stream.send() is False and stream.sent == 5000
    assert output.flush()
    data = daemons.recv(1 << 16)
    number, length = wire.OUT_FRAME.unpack_from(data)
    assert (number, length, data[wire.OUT_FRAME.size:]) == (7, 5000, b"x" * 5000)
    ours.close()
    daemons.close()
