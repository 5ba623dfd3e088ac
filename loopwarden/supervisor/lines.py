"""Reading newline-delimited records with a hard bound on what is held in memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Generic, Protocol, TypeVar, final, overload

if TYPE_CHECKING:
    from .events import InvalidLine
    from .longline import OutputText

TextSink = Callable[[str], None]

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
    """A line that grew past `stream_from` bytes inside its top-level `output` string (supervisor.longline).

    Read from a file (`read_lines`): `chunks()` reads the rest of it from the stream. Split live
    (`LineSplitter` with `open_long`): the splitter `push`es the rest into `text` as it arrives and hands
    the line over once its newline came. Either way it is never held whole.
    """

    __slots__ = ("_done", "_readline", "head", "length", "max_bytes", "over", "start", "text")

    def __init__(self, head: bytes, start: int, readline: Callable[[int], bytes] | None, max_bytes: int) -> None:
        self.head = head  # the first `stream_from` bytes
        self.start = start  # where the output's text starts in `head`
        self.max_bytes = max_bytes
        self.length = len(head)  # bytes of the line so far (its newline excluded)
        self.over = False  # longer than max_bytes: the rest was skipped
        self.text: OutputText | None = None  # live: the decoder the rest of the line is pushed into
        self._readline = readline
        self._done = readline is None

    def head_slices(self) -> Iterator[bytes]:
        """The output's text in `head`, in slices: each is copied as it is decoded."""
        for i in range(self.start, len(self.head), _STREAM_CHUNK):
            yield self.head[i:i + _STREAM_CHUNK]

    def chunks(self) -> Iterator[bytes]:
        """The line from the output's text on, without its newline; stops early past max_bytes."""
        yield from self.head_slices()
        while not self._done:
            assert self._readline is not None
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

    def push(self, data: bytes) -> None:
        """Live: more of the line (no newline), decoded into `text` at once; past max_bytes only counted,
        as `chunks` would skip it, and nothing more once the text is known to be bad."""
        self.length += len(data)
        if self.over or self.text is None or self.text.error:
            return
        if self.length > self.max_bytes:
            self.over = True
            return
        self.text.feed(data)

    def drain(self) -> None:
        """Skip what is left of the line (its reader stopped early)."""
        while not self._done:
            assert self._readline is not None
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
    seq = 0
    readline = stream.readline
    first = first_read(max_bytes, stream_from)
    while True:
        raw = readline(first)
        if not raw:
            return
        seq += 1
        if count is not None:
            count.read = seq
        line = one_line(raw, readline, first, max_bytes)
        if line is None:
            continue
        yield seq, line
        if type(line) is LongLine:
            line.drain()


def first_read(max_bytes: int, stream_from: int) -> int:
    """How much `read_lines` asks `readline` for at the start of a line."""
    return stream_from if 0 < stream_from < max_bytes else max_bytes + 2


def one_line(raw: bytes, readline: Callable[[int], bytes], first: int,
             max_bytes: int) -> bytes | Oversized | LongLine | None:
    """What `read_lines` yields for the line that starts with `raw` (one `readline(first)`), None if blank.

    Reads on with `readline` when the line is longer than `raw`; a LongLine is drained by the caller once
    it has been judged."""
    if len(raw) == first != max_bytes + 2 and not raw.endswith(b"\n"):
        from .longline import open_output

        start = open_output(raw)
        if start is not None:
            return LongLine(raw, start, readline, max_bytes)
        raw += readline(max_bytes + 2 - len(raw))  # another long line: held, as before
    line = raw[:-1] if raw.endswith(b"\n") else raw
    if line.endswith(b"\r"):
        line = line[:-1]
    if len(line) > max_bytes:
        return _skip_rest(readline, raw)
    if not line or line.isspace():  # blank (isspace: the same ASCII blanks as strip, with no copy)
        return None
    return line


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


Line = TypeVar("Line", bytes | Oversized, bytes | Oversized | LongLine)


class LineSplitter(Generic[Line]):
    """Incremental splitting of chunks into lines, for streams read asynchronously.

    Holds at most `max_bytes` of an unfinished line; a longer one becomes `Oversized`
    once its newline arrives, and its bytes are dropped as they come.

    With `open_long`, a line still open after `stream_from` bytes inside its top-level `output`
    string is streamed: `open_long(seq)` gives where its text goes (None: the line is read whole, as
    without it), the rest of the line is decoded as it arrives (`LongLine.push`), and the `LongLine`
    is handed over once its newline came. `seq` numbers the line as the caller does: every item
    `feed` and `finish` returned before it, blank ones included, plus one.
    """

    @overload
    def __init__(self: LineSplitter[bytes | Oversized], max_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None: ...
    @overload
    def __init__(self: LineSplitter[bytes | Oversized | LongLine], max_bytes: int,
                 open_long: Callable[[int], TextSink | None], stream_from: int) -> None: ...

    def __init__(self, max_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 open_long: Callable[[int], TextSink | None] | None = None, stream_from: int = 0) -> None:
        self.open_long = open_long
        self.stream_from = stream_from
        self.looked = False  # the unfinished line was past stream_from and is read whole: not looked at again
        self._max_bytes = self._plain = 0
        self.max_bytes = max_bytes
        self.buffer = bytearray()
        self.skipping = 0  # bytes of an oversized line dropped so far
        self.head = b""
        self.long: LongLine | None = None  # the line being streamed
        self.lines = 0  # items handed out so far

    def feed(self, chunk: bytes) -> list[Line]:
        if not self.buffer and self.long is None and not self.skipping and chunk.endswith(b"\n"):
            # the common case, split in C: whole lines, none long, blank or ending in \r (else the loop below)
            pieces = chunk.split(b"\n")
            pieces.pop()  # the nothing after the last newline
            plain = self._plain
            for piece in pieces:
                if len(piece) > plain or not piece or piece.endswith(b"\r") or piece.isspace():
                    break
            else:
                return self._out(pieces)  # type: ignore[arg-type]  # bytes are Line
        out: list[bytes | Oversized | LongLine] = []
        start = 0
        if self.long is not None:  # the rest of a streamed line goes to its decoder as it comes
            end = chunk.find(b"\n")
            self.long.push(chunk if end < 0 else chunk[:end])
            if end < 0:
                return out  # type: ignore[return-value]  # (see _out)
            out.append(self.long)
            self.long, start = None, end + 1
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._keep(chunk[start:], out)
                return self._out(out)
            piece = chunk[start:end]
            start = end + 1
            if self.skipping:
                out.append(Oversized(self.skipping + len(piece), self.head))
                self.skipping, self.head = 0, b""
                continue
            if self.buffer:
                self.buffer += piece
                piece, self.buffer = bytes(self.buffer), bytearray()
            if len(piece) <= self._plain:  # neither to stream nor over the limit: the common case
                if piece.endswith(b"\r"):
                    piece = piece[:-1]
                out.append(b"" if not piece or piece.isspace() else piece)  # blank: counted, skipped by the caller
            else:
                self._long_piece(piece, out)

    def _long_piece(self, piece: bytes, out: list[bytes | Oversized | LongLine]) -> None:
        """A finished line past stream_from or max_bytes: streamed (unless looked at already), refused, or kept."""
        length = len(piece)
        if self.looked:  # looked at as it came, and read whole
            self.looked = False
        elif self._streams(length):
            long = self._open(piece, len(out))
            if long is not None:
                out.append(long)
                return
        if piece.endswith(b"\r"):
            piece = piece[:-1]
        if len(piece) > self.max_bytes:
            out.append(Oversized(length, piece[:256]))  # its length counts the \r, as read_lines does
        elif piece.isspace():
            out.append(b"")
        else:
            out.append(piece)

    @property
    def unfinished(self) -> int:
        """Bytes of the line not finished yet, read so far (streamed, skipped or held)."""
        if self.long is not None:
            return self.long.length
        return self.skipping or len(self.buffer)

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:  # (a session's adapter, chosen by its first line, sets its own)
        self._max_bytes = value
        streams = self.open_long is not None and 0 < self.stream_from < value
        self._plain = self.stream_from - 1 if streams else value  # longer lines take _long_piece
        self.looked = False

    def _out(self, out: list[bytes | Oversized | LongLine]) -> list[Line]:
        self.lines += len(out)
        return out  # type: ignore[return-value]  # a LongLine only when open_long was given (the overloads)

    def _streams(self, length: int) -> bool:
        """Whether a line of `length` bytes (so far) is past stream_from, and streaming is on."""
        return self.open_long is not None and 0 < self.stream_from <= length and self.stream_from < self.max_bytes

    def _open(self, data: bytes, before: int) -> LongLine | None:
        """Start streaming a line whose first bytes are `data`, if its output string is open at stream_from
        (as `read_lines` decides); `before`: the items of this feed ahead of it."""
        from .longline import OutputText, open_output

        head = data[:self.stream_from]
        start = open_output(head)
        if start is None or self.open_long is None:
            return None
        sink = self.open_long(self.lines + before + 1)
        if sink is None:
            return None
        long = LongLine(head, start, None, self.max_bytes)
        long.text = text = OutputText(sink)
        for piece in long.head_slices():
            text.feed(piece)
        long.push(data[self.stream_from:])
        return long

    def _keep(self, rest: bytes, out: list[bytes | Oversized | LongLine]) -> None:
        if self.skipping:
            self.skipping += len(rest)
            return
        if not self.looked and self._streams(len(self.buffer) + len(rest)):
            self.looked = True
            long = self._open(bytes(self.buffer + rest), len(out))
            if long is not None:
                self.long, self.buffer, self.looked = long, bytearray(), False
                return
        if len(self.buffer) + len(rest) > self.max_bytes + 1:
            self.head = bytes((self.buffer + rest)[:256])
            self.skipping = len(self.buffer) + len(rest)
            self.buffer = bytearray()
            self.looked = False
            return
        self.buffer += rest

    def finish(self) -> list[Line]:
        """The last line when the stream ends without a newline."""
        result: list[bytes | Oversized | LongLine]
        if self.long is not None:
            result = [self.long]
        elif self.skipping:
            result = [Oversized(self.skipping, self.head)]
        elif self.buffer.strip():
            piece = bytes(self.buffer)
            long = self._open(piece, 0) if not self.looked and self._streams(len(piece)) else None
            if long is not None:
                result = [long]
            else:
                length, piece = len(piece), piece.rstrip(b"\r")
                result = [Oversized(length, piece[:256]) if len(piece) > self.max_bytes else piece]
        else:
            result = []
        self.buffer, self.skipping, self.head, self.long, self.looked = bytearray(), 0, b"", None, False
        return self._out(result)


def oversized_line(seq: int, line: Oversized, limit: int) -> InvalidLine:
    """The validation failure an over-long line becomes."""
    from .events import InvalidLine
    from .protocol import preview

    return InvalidLine(seq=seq, reason=f"line longer than {limit:,} bytes ({line.length:,} bytes)",
                       preview=preview(line.head))
