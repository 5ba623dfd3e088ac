"""The keeper's side of the daemon's output connection: every attached stream's bytes on one connection, framed by
channel (keeper_wire.py), so that one send carries what many agents wrote in one pass of the keeper's loop, and
the daemon reads them in one wake-up. Each channel sends within the credit the daemon gave it: a session the
daemon holds back (its store is behind) stops only its own channel."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Final, Protocol

from . import keeper_wire as wire

PENDING: Final = 1 << 20  # framed bytes not yet taken by the connection, at most: past this every channel waits
SMALL: Final = 16 << 10


class Sent(Protocol):
    sent: int  # the stream's offset up to which its carrier has had its bytes


class Output:
    """The daemon's output connection of one generation: frames waiting to go, each channel's credit, and what
    to call when a channel that had to wait may send again."""

    def __init__(self, conn: socket.socket, generation: int) -> None:
        self.conn = conn
        self.generation = generation
        self.pending = bytearray()
        self.credit: dict[int, int] = {}
        self.waiting: dict[int, Callable[[], None]] = {}  # channel -> its stream's pump, once it may send
        self._credits = wire.CreditReader()
        self.closed = False

    def channel(self, number: int) -> Channel:
        self.credit[number] = wire.FIRST_CREDIT
        return Channel(self, number)

    def carry(self, number: int, held: bytearray, start: int, size: int) -> int:
        """Put up to `size` bytes of `held` from `start` as one frame of channel `number`, within its credit and the
        room left; how many (0: it waits). OSError once the daemon went."""
        if self.closed:
            raise ConnectionResetError("the daemon's output connection is closed")
        pending = self.pending
        size = min(size, self.credit.get(number, 0), PENDING - len(pending))  # (a header may put it past PENDING)
        if size <= 0:
            return 0
        self.credit[number] -= size
        pending += wire.OUT_FRAME.pack(number, size)
        if size <= SMALL:  # (a copy costs less than a view)
            pending += held[start:start + size]
        else:
            with memoryview(held) as view:
                pending += view[start:start + size]
        return size

    def carry_chunk(self, number: int, chunk: bytes, stream: Sent) -> bool:
        """What an agent just wrote, framed whole as channel `number`'s if its credit and the room allow (its
        stream's `sent` moves past it); False when it has to wait or the daemon went."""
        size = len(chunk)
        credit = self.credit.get(number, 0)
        pending = self.pending
        if self.closed or size > credit or len(pending) + size > PENDING:
            return False
        self.credit[number] = credit - size
        pending += wire.OUT_FRAME.pack(number, size)
        pending += chunk
        stream.sent += size
        return True

    def end(self, number: int) -> None:
        """The channel's EOF."""
        self.pending += wire.OUT_FRAME.pack(number, wire.EOF_LENGTH)

    def drop(self, number: int) -> None:
        self.credit.pop(number, None)
        self.waiting.pop(number, None)

    def flush(self) -> bool:
        """Send what waits (never blocking); whether everything went. OSError once the daemon went."""
        if self.pending:
            try:
                del self.pending[:self.conn.send(self.pending)]
            except BlockingIOError:
                pass
        return not self.pending

    def read_credit(self, data: bytes) -> None:
        """Credit frames from the daemon: each channel given more may send again."""
        for number, granted in self._credits.feed(data):
            if number in self.credit:
                self.credit[number] += granted

    @property
    def ready(self) -> bool:
        """Whether a waiting channel may send now (the keeper's loop then does not sleep)."""
        return bool(self.waiting) and self._room() and any(self.credit.get(n, 0) > 0 for n in self.waiting)

    def wake(self) -> list[Callable[[], None]]:
        """The pumps of waiting channels that may send now."""
        if not self._room():
            return []
        ready = [number for number in self.waiting if self.credit.get(number, 0) > 0]
        return [self.waiting.pop(number) for number in ready]

    def _room(self) -> bool:
        """Open, and room left for more frames."""
        return not self.closed and len(self.pending) < PENDING

    def close(self) -> None:
        self.closed = True
        self.conn.close()
        self.waiting.clear()


class Channel:
    """One stream's carrier on the output connection, where a daemon without one has a socket: its bytes go by
    `Output.carry`; shutdown, close and fileno as a socket's."""

    def __init__(self, output: Output, number: int) -> None:
        self.output = output
        self.number = number

    def shutdown(self, _how: int) -> None:
        if self.output.closed:
            raise ConnectionResetError("the daemon's output connection is closed")
        self.output.end(self.number)

    def close(self) -> None:
        self.output.drop(self.number)

    def fileno(self) -> int:
        """-1: no descriptor of its own (the output connection's is watched as the Output's)."""
        return -1
