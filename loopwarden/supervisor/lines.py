"""Reading newline-delimited records with a hard bound on what is held in memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Protocol, final

if TYPE_CHECKING:
    from .events import InvalidLine

DEFAULT_MAX_LINE_BYTES = 1 << 20
RECORDED_MAX_LINE_BYTES = 64 << 20  # Claude Code and Codex streams carry base64 images on one line
_SKIP_CHUNK = 1 << 16
_STREAM_CHUNK = 1 << 18


@final  # no subclasses: `type(line) is Oversized` tells mypy the other branch has bytes
@dataclass(slots=True, frozen=True)
class Oversized:
    """A line longer than the limit; only its length and first bytes were kept."""

    length: int
    head: bytes


@final
class LongLine:
    """A line that grew past `stream_from` bytes inside its top-level `output` string (supervisor.longline):
    `chunks()` reads the rest of it from the stream, so it is never held whole."""

    __slots__ = ("_done", "_readline", "head", "length", "max_bytes", "over", "start")

    def __init__(self, head: bytes, start: int, readline: Callable[[int], bytes], max_bytes: int) -> None:
        self.head = head  # the first `stream_from` bytes
        self.start = start  # where the output's text starts in `head`
        self.max_bytes = max_bytes
        self.length = len(head)  # bytes of the line so far (its newline excluded)
        self.over = False  # longer than max_bytes: the rest was skipped
        self._readline = readline
        self._done = False

    def chunks(self) -> Iterator[bytes]:
        """The line from the output's text on, without its newline; stops early past max_bytes."""
        for i in range(self.start, len(self.head), _STREAM_CHUNK):  # in slices: each is copied as it is decoded
            yield self.head[i:i + _STREAM_CHUNK]
        while not self._done:
            chunk = self._readline(_STREAM_CHUNK)
            if not chunk:
                self._done = True
                return
            if chunk.endswith(b"\n"):
                chunk = chunk[:-1]
                self._done = True
            self.length += len(chunk)
            if self.length > self.max_bytes:
                self.over = True
                self.drain()
                return
            yield chunk

    def drain(self) -> None:
        """Skip what is left of the line (its reader stopped early)."""
        while not self._done:
            chunk = self._readline(_SKIP_CHUNK)
            if not chunk or chunk.endswith(b"\n"):
                self.length += len(chunk) - (1 if chunk else 0)
                self._done = True
            else:
                self.length += len(chunk)


class LineCount(Protocol):
    read: int


def read_lines(stream: BinaryIO, max_bytes: int = DEFAULT_MAX_LINE_BYTES, stream_from: int = 0,
               count: LineCount | None = None) -> Iterator[tuple[int, bytes | Oversized | LongLine]]:
    """Yield (1-based line number, line) with blank lines skipped (but counted).

    A line over `max_bytes` is yielded as `Oversized` and its remainder is read
    and discarded in chunks, so it never sits in memory whole. With `stream_from`,
    a line still open after that many bytes inside its top-level `output` string
    is yielded as a `LongLine` to be read on in chunks (what is left unread is skipped).
    `count.read` is kept at the number of lines read, blank ones included.
    """
    from .longline import open_output

    seq = 0
    readline = stream.readline
    first = stream_from if 0 < stream_from < max_bytes else max_bytes + 2
    while True:
        raw = readline(first)
        if not raw:
            return
        seq += 1
        if count is not None:
            count.read = seq
        if len(raw) == first != max_bytes + 2 and not raw.endswith(b"\n"):
            start = open_output(raw)
            if start is not None:
                long = LongLine(raw, start, readline, max_bytes)
                yield seq, long
                long.drain()
                continue
            raw += readline(max_bytes + 2 - len(raw))  # another long line: held, as before
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > max_bytes:
            yield seq, _skip_rest(readline, raw)
            continue
        if not line or line.isspace():  # blank (isspace: the same ASCII blanks as strip, with no copy)
            continue
        yield seq, line


def _skip_rest(readline: Callable[[int], bytes], head: bytes) -> Oversized:
    length = len(head)
    kept = head[:256]
    while not head.endswith(b"\n"):
        head = readline(_SKIP_CHUNK)
        if not head:
            break
        length += len(head)
    if head.endswith(b"\n"):
        length -= 1
    return Oversized(length=length, head=kept)


class LineSplitter:
    """Incremental splitting of chunks into lines, for streams read asynchronously.

    Holds at most `max_bytes` of an unfinished line; a longer one becomes `Oversized`
    once its newline arrives, and its bytes are dropped as they come.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.buffer = bytearray()
        self.skipping = 0  # bytes of an oversized line dropped so far
        self.head = b""

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._keep(chunk[start:])
                return out
            piece = chunk[start:end]
            start = end + 1
            if self.skipping:
                out.append(Oversized(self.skipping + len(piece), self.head))
                self.skipping, self.head = 0, b""
                continue
            if self.buffer:
                self.buffer += piece
                piece, self.buffer = bytes(self.buffer), bytearray()
            if piece.endswith(b"\r"):
                piece = piece[:-1]
            if len(piece) > self.max_bytes:
                out.append(Oversized(len(piece), piece[:256]))
            elif piece.strip():
                out.append(piece)
            else:
                out.append(b"")  # blank: counted as a line, skipped by the caller

    def _keep(self, rest: bytes) -> None:
        if self.skipping:
            self.skipping += len(rest)
            return
        if len(self.buffer) + len(rest) > self.max_bytes + 1:
            self.head = bytes((self.buffer + rest)[:256])
            self.skipping = len(self.buffer) + len(rest)
            self.buffer = bytearray()
            return
        self.buffer += rest

    def finish(self) -> list[bytes | Oversized]:
        """The last line when the stream ends without a newline."""
        if self.skipping:
            result: list[bytes | Oversized] = [Oversized(self.skipping, self.head)]
        elif self.buffer.strip():
            piece = bytes(self.buffer).rstrip(b"\r")
            result = [Oversized(len(piece), piece[:256]) if len(piece) > self.max_bytes else piece]
        else:
            result = []
        self.buffer, self.skipping, self.head = bytearray(), 0, b""
        return result


def line_limit(configured: int, fmt: str) -> int:
    """limits.max_line_bytes, or its default for the format (0 = by format)."""
    if configured:
        return configured
    return DEFAULT_MAX_LINE_BYTES if fmt == "native" else RECORDED_MAX_LINE_BYTES


def oversized_line(seq: int, line: Oversized, limit: int) -> InvalidLine:
    """The validation failure an over-long line becomes."""
    from .events import InvalidLine
    from .protocol import preview

    return InvalidLine(seq=seq, reason=f"line longer than {limit:,} bytes ({line.length:,} bytes)",
                       preview=preview(line.head))
