"""A very long native line judged by a bounded prefix, its size and its digest, never held whole.

A tool_result whose `output` runs to megabytes is the only long line real agents write. Once a line
has grown past `STREAM_FROM` bytes while inside the top-level `output` string, the reader hands the rest
over in chunks: `OutputText` decodes the string as it arrives (orjson decodes each safe slice, so the
checks on escapes and UTF-8 are orjson's), keeps its first `PREFIX_CHARS` characters, counts it, digests it
as `signature.output_digest` would and passes each decoded piece to a sink (a spill file). The line's
other fields are parsed as usual with the output replaced by the prefix; the event carries the full
`size` and `digest`. Pure: no I/O here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

import orjson

from . import events as ev
from .lines import LongLine, Oversized, oversized_line

STREAM_FROM = 1 << 20  # bytes of one line held before its output is streamed (the native default limit)
PREFIX_CHARS = 64 * 1024  # what the engine reads of a streamed output (signature._OUTPUT_HEAD)
_SLICE = 1 << 18

# one JSON token other than a string (strings are found by _STRING_REST): a bracket, colon, comma, bare value, blanks
_TOKEN = re.compile(rb'[\[\]{}:,]|[^\s\[\]{}:,"]+|\s+')
_BACKSLASH = 0x5C
# a string's text up to its closing quote; possessive, so a long string without one keeps no backtracking stack
_STRING_REST = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)


def open_output(head: bytes) -> int | None:
    """Where the top-level `output` string's text starts, when `head` ends inside it; else None."""
    pos, depth, key, expect_key = 0, 0, b"", False
    while pos < len(head):
        if head[pos] == 0x22:  # a string
            end = _closing_quote(head, pos + 1)
            if end is None:  # unterminated: the one the head ends in
                return pos + 1 if depth == 1 and not expect_key and key == b"output" else None
            if depth == 1 and expect_key:
                key, expect_key = head[pos + 1:end], False
            elif depth == 1:
                key = b""
            pos = end + 1
            continue
        match = _TOKEN.match(head, pos)
        if match is None:
            return None
        token = match.group()
        pos = match.end()
        first = token[0]
        if first in b"{[":
            depth += 1
            expect_key = first == 0x7B and depth == 1
        elif first in b"}]":
            depth -= 1
        elif first == 0x2C:  # ,
            expect_key = depth == 1
        elif depth == 1 and first not in b": \t\r\n":
            key = b""  # a bare value
    return None


def _closing_quote(data: bytes, start: int) -> int | None:
    """The position of the quote that ends a string whose text starts at `start`, or None."""
    match = _STRING_REST.match(data, start)
    return match.end() - 1 if match else None


def _escape_start(data: bytes, p: int, lo: int) -> bool:
    """Whether the backslash at `p` begins an escape (an odd run of backslashes ends at it)."""
    q = p
    while q > lo and data[q - 1] == _BACKSLASH:
        q -= 1
    return (p - q) % 2 == 0


def _safe_cut(data: bytes, c: int) -> int:
    """The last place at or before `c` that splits neither a UTF-8 sequence, an escape nor a surrogate pair."""
    while 0 < c < len(data) and 0x80 <= data[c] < 0xC0:
        c -= 1
    moved = True
    while moved and c > 0:
        moved = False
        for p in range(c - 1, max(c - 6, 0) - 1, -1):
            if data[p] != _BACKSLASH or not _escape_start(data, p, 0):
                continue
            length = 6 if data[p + 1:p + 2] == b"u" else 2
            high = length == 6 and data[p + 2:p + 4].lower() in (b"d8", b"d9", b"da", b"db")
            if p + length > c or (high and p + length == c):
                c, moved = p, True
            break
    return c


class OutputText:
    """The streamed `output` string: prefix, size in characters, digest, and the bytes after it."""

    def __init__(self, sink: Callable[[str], None] | None = None) -> None:
        self.prefix: list[str] = []
        self.prefix_chars = 0
        self.size = 0
        self.hasher = hashlib.blake2b(digest_size=16)
        self.sink = sink
        self.carry = b""
        self._rest: list[bytes] | None = None  # the line after the closing quote, once it came
        self.error: str | None = None

    def feed(self, chunk: bytes) -> None:
        """More of the string (and, once it ends, of the line after it)."""
        if self._rest is not None:
            self._rest.append(chunk)  # the line's other fields, held as it would be (a list: no quadratic +=)
            return
        data = self.carry + chunk if self.carry else chunk
        cut = _safe_cut(data, max(0, len(data) - 16))
        if cut <= _SLICE and self._whole(data[:cut]):  # the common case: no closing quote before `cut`
            end = _closing_quote(data, cut)  # (a few bytes)
            if end is None:
                self.carry = data[cut:]
                return
            self._take(data[cut:end])
            self.carry, self._rest = b"", [data[end + 1:]]
            return
        end = _closing_quote(data, 0)
        if end is not None:
            self._take(data[:end])
            self.carry, self._rest = b"", [data[end + 1:]]
            return
        self._take(data[:cut])
        self.carry = data[cut:]

    def _whole(self, raw: bytes) -> bool:
        """Decode `raw` if it is all the string's text, without its closing quote: orjson reads it as one string
        only then (an unescaped quote in it would leave text after the string). False: look closer."""
        if not raw or self.error:
            return not raw
        try:
            text = orjson.loads(b'"' + raw + b'"')
        except orjson.JSONDecodeError:
            return False
        self._keep(text)
        return True

    def _take(self, raw: bytes) -> None:
        start = 0
        while start < len(raw):  # in slices cut where no character or escape is split
            end = len(raw) if len(raw) - start <= _SLICE else _safe_cut(raw, start + _SLICE)
            if end <= start:
                end = len(raw)
            self._text(raw[start:end])
            start = end

    def _text(self, raw: bytes) -> None:
        if not raw or self.error:
            return
        try:
            text = orjson.loads(b'"' + raw + b'"')
        except orjson.JSONDecodeError as exc:
            self.error = str(exc)
            return
        self._keep(text)

    def _keep(self, text: str) -> None:
        """Count, digest, keep the first part of and pass on a decoded piece of the text."""
        self.size += len(text)
        self.hasher.update(text.encode("utf-8", "surrogatepass"))
        if self.prefix_chars < PREFIX_CHARS:
            kept = text[:PREFIX_CHARS - self.prefix_chars]
            self.prefix.append(kept)
            self.prefix_chars += len(kept)
        if self.sink is not None:
            self.sink(text)

    @property
    def rest(self) -> bytes | None:
        """The line after the string's closing quote, or None while the string is open."""
        return None if self._rest is None else b"".join(self._rest)

    def digest(self, failed: bool) -> bytes:
        """`signature.output_digest` of the whole text."""
        h = self.hasher.copy()
        h.update(b"E" if failed else b"O")
        return h.digest()

    def text(self) -> str:
        return "".join(self.prefix)


def streamed_event(seq: int, line: LongLine, sink: Callable[[str], None] | None = None) -> ev.Event:
    """The event of a long native line, read on from its stream; its output text goes to `sink` as it comes."""
    text = OutputText(sink)
    for chunk in line.chunks():
        text.feed(chunk)
        if text.error:
            break
    return line_event(seq, line, text)


def line_event(seq: int, line: LongLine, text: OutputText) -> ev.Event:
    """The event of a long native line whose output was decoded into `text` (read on, or pushed live)."""
    from . import protocol

    if line.over:
        return oversized_line(seq, Oversized(line.length, line.head[:256]), line.max_bytes)
    opening = line.head[:line.start]
    if text.error:
        return ev.InvalidLine(seq=seq, reason=protocol.json_failure(text.error), preview=protocol.preview(line.head))
    rest = text.rest
    if rest is None:  # the line ended inside the string: orjson names what is missing
        event = protocol.parse_line(opening + text.carry, seq)
    else:
        event = protocol.parse_line(opening + b'"' + rest, seq)
    if type(event) is ev.ToolResult:
        event.output = text.text()
        event.size = text.size
        event.digest = text.digest(event.failed)
    elif type(event) is ev.InvalidLine:
        event.preview = protocol.preview(line.head)
    return event
