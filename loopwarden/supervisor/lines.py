"""Reading newline-delimited records with a hard bound on what is held in memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Iterator

DEFAULT_MAX_LINE_BYTES = 1 << 20
_SKIP_CHUNK = 1 << 16


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


def _skip_rest(readline, head: bytes) -> Oversized:  # type: ignore[no-untyped-def]
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
