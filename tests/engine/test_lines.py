"""The bounded line reader: long lines are reported, never held whole."""

from __future__ import annotations

import io
import tracemalloc

from loopwarden.supervisor.lines import Oversized, read_lines


class EndlessLine(io.RawIOBase):
    """A stream of `size` bytes with no newline, then a short line: never materialised."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.tail = b'\n{"type":"done"}\n'

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        if self.left > 0:
            n = min(len(buffer), self.left)
            buffer[:n] = b"x" * n
            self.left -= n
            return n
        n = min(len(buffer), len(self.tail))
        buffer[:n] = self.tail[:n]
        self.tail = self.tail[n:]
        return n


def test_blank_lines_are_skipped_but_counted() -> None:
    lines = list(read_lines(io.BytesIO(b'a\n\n  \r\nb\r\nc'), 100))
    assert lines == [(1, b"a"), (4, b"b"), (5, b"c")]


def test_a_line_at_the_limit_is_kept_and_one_byte_more_is_oversized() -> None:
    data = b"x" * 10 + b"\n" + b"y" * 11 + b"\n" + b"z" * 10 + b"\r\n" + b"ok"
    lines = list(read_lines(io.BytesIO(data), 10))
    assert lines[0] == (1, b"x" * 10)
    assert lines[1][0] == 2 and isinstance(lines[1][1], Oversized) and lines[1][1].length == 11
    assert lines[2] == (3, b"z" * 10)
    assert lines[3] == (4, b"ok")


def test_a_200_megabyte_line_without_newline_is_never_held_in_memory() -> None:
    size = 200 << 20
    stream = io.BufferedReader(EndlessLine(size), buffer_size=1 << 16)
    tracemalloc.start()
    try:
        lines = list(read_lines(stream, 1 << 20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(lines[0][1], Oversized)
    assert lines[0][1].length == size
    assert lines[1] == (2, b'{"type":"done"}')
    assert peak < 8 << 20, f"peak {peak:,} bytes while reading a {size:,}-byte line"


def test_the_live_splitter_never_holds_more_than_the_limit() -> None:
    from loopwarden.supervisor.lines import LineSplitter

    splitter = LineSplitter(1 << 20)
    chunk = b"x" * (1 << 16)
    tracemalloc.start()
    try:
        for _ in range(3200):  # 200 MiB without a newline, 64 KiB at a time
            assert splitter.feed(chunk) == []
        out = splitter.feed(b'tail\n{"type":"done"}\n')
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(out[0], Oversized) and out[0].length == (200 << 20) + 4
    assert out[1] == b'{"type":"done"}'
    assert peak < 4 << 20


def test_the_live_splitter_keeps_lines_split_across_chunks() -> None:
    from loopwarden.supervisor.lines import LineSplitter

    splitter = LineSplitter(10)
    assert splitter.feed(b"abc\nde") == [b"abc"]
    assert splitter.feed(b"f\r\n\n0123456789A") == [b"def", b""]
    assert [type(x) for x in splitter.feed(b"BC\nok")] == [Oversized]
    assert splitter.finish() == [b"ok"]


def test_the_live_splitter_splits_whole_chunks_as_it_splits_them_byte_by_byte() -> None:
    """Chunks of whole lines are split in one C call (the common case live); blank lines, a \\r, a line over
    the limit or one left open send them the careful way: the items are the same either way."""
    import random

    from loopwarden.supervisor.lines import LineSplitter

    def shown(items: list[bytes | Oversized]) -> list[object]:  # an over-long line's head depends on the chunks
        return [("over", item.length) if isinstance(item, Oversized) else item for item in items]

    def bytewise(data: bytes) -> list[object]:
        splitter = LineSplitter(16)
        out = [item for i in range(len(data)) for item in splitter.feed(data[i:i + 1])]
        return shown(out + splitter.finish())

    samples = [b'{"a":1}\n{"b":2}\n', b"one\n\ntwo\n", b"one\r\ntwo\n", b"one\n  \ntwo\n",
               b"short\n" + b"x" * 40 + b"\nafter\n", b"whole\nopen", b"\n", b"x" * 16 + b"\n" + b"y" * 17 + b"\n"]
    rng = random.Random(16)
    alphabet = [b"a", b"b", b"\n", b"\r", b" ", b"{", b"}"]
    samples += [b"".join(rng.choices(alphabet, k=rng.randint(1, 60))) + b"\n" for _ in range(400)]
    for data in samples:
        splitter = LineSplitter(16)
        assert shown(splitter.feed(data) + splitter.finish()) == bytewise(data), data
        assert splitter.lines == len(bytewise(data))
