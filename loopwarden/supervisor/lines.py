"""Reading newline-delimited records with a hard bound on what is held in memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, final

if TYPE_CHECKING:
    from .events import InvalidLine

DEFAULT_MAX_LINE_BYTES = 1 << 20
RECORDED_MAX_LINE_BYTES = 64 << 20  # Claude Code and Codex streams carry base64 images on one line
_SKIP_CHUNK = 1 << 16


@final  # no subclasses: `type(line) is Oversized` tells mypy the other branch has bytes
@dataclass(slots=True, frozen=True)
class Oversized:
    """A line longer than the limit; only its length and first bytes were kept."""

    length: int
    head: bytes


def read_lines(stream: BinaryIO, max_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[tuple[int, bytes | Oversized]]:
    """Yield (1-based line number, line) with blank lines skipped (but counted).

    A line over `max_bytes` is yielded as `Oversized` and its remainder is read
    and discarded in chunks, so it never sits in memory whole.
    """
    seq = 0
    readline = stream.readline
    while True:
        raw = readline(max_bytes + 2)
        if not raw:
            return
        seq += 1
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > max_bytes:
            yield seq, _skip_rest(readline, raw)
            continue
        if not line.strip():
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
