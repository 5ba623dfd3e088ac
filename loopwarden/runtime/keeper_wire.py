"""What the daemon and the keeper say to each other (keeper.py holds the agents; keeper_link.py is the daemon's side).

One unix socket, private to the user. Each connection starts with one JSON line saying what it is:

    {"op": "control", ...}                      the daemon's control connection (one at a time), JSON lines both ways
    {"op": "attach", "sid": S, "stream": "out"|"err", "from": OFFSET, "generation": G}
                                                the agent's stdout or stderr as raw bytes from OFFSET on; EOF after
                                                the agent's own EOF, once everything was sent
    {"op": "attach", "sid": S, "stream": "in", "generation": G}   frames for the agent's stdin (below)
    {"op": "output", "generation": G}           the daemon's output connection (a keeper whose hello says
                                                "output": true): the keeper answers one newline once it is
                                                taken, then sends output frames; the daemon sends credit frames
    {"op": "attach", "sid": S, "stream": "out"|"err", "from": OFFSET, "generation": G, "channel": C}
                                                the stream's bytes from OFFSET on go as channel C on the output
                                                connection (this connection is closed)

Control requests (daemon -> keeper), each answered by one line with the same "id":
    hello {daemon: {argv, env, cwd}}            who starts a daemon again if this one dies -> {generation: G,
                                                sessions: [...]}; a stream opened with another daemon's G is closed
    spawn {sid, argv, env, cwd, max_runtime, grace}  -> {pid}
    take {sid, seq}                             a new daemon takes a session up, its stdout stored up to line SEQ:
                                                stdin frames an earlier daemon queued for later lines are dropped
                                                (those lines are read and judged again) -> the session
    signal {sid, sig, group}                    a signal to the agent's group (or its leader alone)
    stored {sid, out: [OFFSET, SEQ], err: OFFSET}    everything up to there is stored: the keeper forgets it, and
                                                stdin frames answering lines up to SEQ go to the agent
    stored {sid, seq: SEQ}                      stdout lines up to SEQ are stored: their stdin frames go
    limit {sid, max_runtime}                    the agent's max_runtime changed (seconds from its start, or null)
    consumed {sid, line: OFFSET, upto: OFFSET}  the daemon read an unfinished stdout line starting at LINE up to
                                                UPTO: forgotten once everything before LINE is
    release {sid}                               the session is over for the daemon: the keeper forgets it
    bye {}                                      the daemon leaves on purpose (an upgrade): wait for the next one
    shutdown {}                                 the daemon stops for good: stop what it left, start no daemon
Keeper -> daemon, unasked: {"op": "exited", "sid", "code", "reason"} when an agent exits (again after a `take`).

An output frame is a header (OUT_FRAME: the channel, the data's length; EOF_LENGTH for the stream's EOF) and the
data. A channel starts with FIRST_CREDIT bytes it may send; a credit frame (CREDIT_FRAME: the channel, bytes) from
the daemon gives it more, once what it sent was read.

A stdin frame is a header (FRAME: the line seq it answers, the data's length) and the data; a frame of length 0
closes the agent's stdin. A frame reaches the agent only once the line it answers is stored.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Final

FRAME: Final = struct.Struct(">QI")  # (the stdout line seq a frame answers, the data's length)
OUT_FRAME: Final = struct.Struct(">II")  # (the channel, the data's length or EOF_LENGTH)
CREDIT_FRAME: Final = struct.Struct(">II")  # (the channel, bytes it may send more)
EOF_LENGTH: Final = 0xFFFFFFFF
FIRST_CREDIT: Final = 256 << 10  # bytes a channel may send before the daemon gives it more
MAX_OUT_FRAME: Final = 1 << 20  # bytes of one output frame's data at most (more is a broken connection)
MAX_FRAME: Final = 16 << 20  # bytes of one stdin frame at most
MAX_LINE: Final = 4 << 20  # bytes of one control line at most (a spawn's environment dominates)
SOCKET_NAME: Final = "keeper.sock"
STREAMS: Final = ("out", "err")
STREAM_BUFFER: Final = 1 << 20  # socket buffer bytes of an output stream (the kernel may cap it)


def encode(message: dict[str, Any]) -> bytes:
    """One control line."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any] | None:
    """A control line's message, or None when it is not one."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def frame(seq: int, data: bytes) -> bytes:
    """A stdin frame: `data` for the agent once stdout's line `seq` is stored (b"" closes its stdin)."""
    return FRAME.pack(seq, len(data)) + data


class FrameReader:
    """Stdin frames out of the bytes of an "in" connection, as they come."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.bad = False  # a frame longer than MAX_FRAME: the connection is dropped

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buffer += data
        frames: list[tuple[int, bytes]] = []
        while len(self._buffer) >= FRAME.size:
            seq, size = FRAME.unpack_from(self._buffer)
            if size > MAX_FRAME:
                self.bad = True
                return frames
            end = FRAME.size + size
            if len(self._buffer) < end:
                break
            frames.append((seq, bytes(self._buffer[FRAME.size:end])))
            del self._buffer[:end]
        return frames


def count(value: object) -> int:
    """An offset or line seq from a message: a non-negative int, else 0."""
    return value if isinstance(value, int) and value >= 0 else 0


class CreditReader:
    """Credit frames out of the bytes the daemon sends on its output connection, as they come."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, int]]:
        buffer = self._buffer
        buffer += data
        size = CREDIT_FRAME.size
        whole = len(buffer) - len(buffer) % size
        credits = [CREDIT_FRAME.unpack_from(buffer, at) for at in range(0, whole, size)]
        del buffer[:whole]
        return credits
