"""Replay: feed a recorded stream through the engine, offline and deterministically."""

from __future__ import annotations

import io
import time
from collections import Counter as Tally
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from .sessions.base import Adapter
from .sessions.formats import HEAD_BYTES, HEAD_LINES, Guess, guess_format
from .sessions.registry import recording
from .supervisor import protocol
from .supervisor.config import Config
from .supervisor.events import Event, InvalidLine, ToolResult
from .supervisor.health import SessionHealth
from .supervisor.ladders import for_agent
from .supervisor.lines import LongLine, Oversized, first_read, one_line, oversized_line, read_lines
from .supervisor.longline import STREAM_FROM, streamed_event
from .runtime.spill import Spiller, SpillStream, spill_event
from .supervisor.verdicts import Action, Verdict

__all__ = ["Replayer", "ReplaySummary", "WrongFormat", "choose_format", "iter_events", "open_recording"]


class WrongFormat(ValueError):
    """The recording's first lines fit another format than the one asked for."""


@dataclass
class LineTally:
    """How much of the input was read, and how much of it gave events."""

    read: int = 0  # lines read (records, for a JSON array)
    judged: int = 0  # of those, the ones that gave at least one event
    unit: str = "lines"


class _Counted:
    """A stream whose `readline` counts the lines it hands out, trailing blank ones included."""

    def __init__(self, stream: BinaryIO, tally: LineTally) -> None:
        self._readline = stream.readline
        self._tally = tally
        self._open_line = False  # the last chunk ended mid-line (an over-long line is read in chunks)

    def readline(self, size: int = -1) -> bytes:
        raw = self._readline(size)
        if raw.endswith(b"\n"):
            self._tally.read += 1
            self._open_line = False
        elif raw:
            self._open_line = True
        elif self._open_line:  # end of input after a last line with no newline
            self._tally.read += 1
            self._open_line = False
        return raw


def max_line_bytes(config: Config, fmt: str) -> int:
    """The configured limit, or the format's adapter's default: recorded formats carry base64 images."""
    return config.limits.max_line_bytes or recording(fmt).line_bytes


TextSink = Callable[[str], None]


def iter_events(stream: BinaryIO, fmt: str, limit: int, tally: LineTally | None = None, *, array: bool | None = None,
                sink: Callable[[int], TextSink | None] | None = None) -> Generator[Event, None, None]:
    """Every event of a stream, with over-long lines as InvalidLine; `tally` counts the lines read (a typed
    stream's once the reading ends, or the generator is closed).

    `array`: the stream is one JSON array of records (a format whose adapter reads arrays); None peeks at it.
    A native tool_result whose output runs past STREAM_FROM bytes is read on in chunks and judged by its
    first part, size and digest; `sink(seq)` may give a function each piece of that text is passed to.
    """
    tally = tally if tally is not None else LineTally()
    source = recording(fmt)
    if source.reads_arrays and (array if array is not None else _starts_with_array(stream)):
        yield from _array_events(stream, source, limit, tally)
        return
    if source.typed_lines is not None:
        yield from _typed_events(stream, source, limit, tally, sink)
        return
    lines = read_lines(_Counted(stream, tally), limit)  # type: ignore[arg-type]  # only readline is used
    parse = source.replay_parser()
    for seq, line in lines:
        events = [oversized_line(seq, line, limit)] if type(line) is Oversized else parse(line, seq)  # type: ignore[arg-type]  # no LongLine without stream_from
        if events:
            tally.judged += 1
            yield from events


def _typed_events(stream: BinaryIO, source: type[Adapter], limit: int, tally: LineTally,
                  sink: Callable[[int], TextSink | None] | None) -> Iterator[Event]:
    """The events of a format whose every line is one event: the common line (whole, within the limit, plainly
    valid) read at once by the adapter's typed lines, any other by its parser (read_lines' reading, written out);
    a long tool output read in chunks, when the adapter streams them. The tally is written once, when the reading
    ends or the reader is closed, not per line."""
    assert source.typed_lines is not None
    typed = source.typed_lines.read
    parse = source.replay_parser()
    readline = stream.readline
    first = first_read(limit, STREAM_FROM if source.streams_outputs else 0)
    seq = ignored = 0
    try:
        while True:
            raw = readline(first)
            if not raw:
                return
            seq += 1
            if raw[-1] == 10 and len(raw) <= limit:  # a newline (msgspec skips it, or \r\n); raw is not empty
                read = typed(raw, seq)
                if read is not None:
                    yield read[0]
                    continue
            line = one_line(raw, readline, first, limit)  # blank, long, too long, or to be explained
            if line is None:
                ignored += 1
            elif type(line) is bytes:
                events = parse(line, seq)
                if not events:
                    ignored += 1
                yield from events
            elif type(line) is LongLine:
                yield streamed_event(seq, line, sink(seq) if sink else None)
                line.drain()
            else:
                yield oversized_line(seq, line, limit)  # type: ignore[arg-type]
    finally:
        tally.read, tally.judged = seq, seq - ignored


def _array_events(stream: BinaryIO, source: type[Adapter], limit: int, tally: LineTally) -> Iterator[Event]:
    tally.unit = "records"
    data = stream.read(limit + 1)  # a JSON array (the claude-code-action fixture shape), bounded
    if len(data) > limit:
        tally.read = tally.judged = 1
        yield InvalidLine(seq=1, reason=f"JSON array longer than {limit:,} bytes", preview=protocol.preview(data))
        return
    for events in source.array_events(data):
        tally.read += 1
        if events:
            tally.judged += 1
            yield from events


def _starts_with_array(stream: BinaryIO) -> bool:
    """Whether the stream's first non-blank byte is '[' (peeked, nothing consumed)."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return False
    head = peek(256)[:256].lstrip()
    return head[:1] == b"["


def open_recording(stream: BinaryIO) -> tuple[Guess, BinaryIO]:
    """What the stream's first lines look like, and a stream that still reads from its start."""
    if stream.seekable():
        start = stream.tell()
        head = stream.read(HEAD_BYTES)
        complete = not stream.read(1)
        stream.seek(start)
        return guess_format(head, complete=complete), stream
    chunks: list[bytes] = []
    size = newlines = 0
    read1 = getattr(stream, "read1", stream.read)
    complete = False
    while size < HEAD_BYTES and newlines <= HEAD_LINES:  # a pipe: what it gives, up to enough lines
        chunk = read1(HEAD_BYTES - size)
        if not chunk:
            complete = True
            break
        chunks.append(chunk)
        size += len(chunk)
        newlines += chunk.count(b"\n")
    head = b"".join(chunks)
    return guess_format(head, complete=complete), io.BufferedReader(_Prefixed(head, stream), 1 << 16)


class _Prefixed(io.RawIOBase):
    """The bytes already read from a pipe, then the rest of the pipe."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = memoryview(head)
        self._rest = rest
        self._read1 = getattr(rest, "read1", rest.read)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def choose_format(requested: str | None, guess: Guess, name: str) -> str:
    """The format to replay in: the one asked for, unless the input is plainly another; else the guess."""
    if requested is None:
        return guess.fmt or "native"
    if guess.fmt is not None and guess.fmt != requested and not guess.fits_any(requested):
        raise WrongFormat(f"{name} does not look like {requested}; it looks like {guess.fmt} "
                          f"(use --format {guess.fmt}, or leave --format out to detect it)")
    return requested



@dataclass
class ReplaySummary:
    format: str = "native"
    detected: bool = False  # the format was told from the input's first lines
    lines: int = 0  # lines read (records, for a JSON array), up to where the session ended
    ignored: int = 0  # of those, the ones that gave no event: blank, or nothing to judge on their own
    unit: str = "lines"
    events: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    verdicts: int = 0
    by_rule: dict[str, int] = field(default_factory=dict)
    by_action: dict[str, int] = field(default_factory=dict)
    validation_failures: int = 0
    validation_examples: list[dict[str, Any]] = field(default_factory=list)
    state: str = "running"
    termination: str | None = None
    stopped_at: int | None = None
    pending_gates: list[str] = field(default_factory=list)
    counters: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Replayer:
    """Drives one SessionHealth over a stream; time comes from the events' `ts`."""

    def __init__(self, config: Config, *, spiller: Spiller | None = None, spill: bool = True) -> None:
        self.config = config
        self.spill = spill  # False: report large outputs without writing or truncating anything
        self.health = SessionHealth(config)
        self.spiller = spiller
        self.now = 0.0
        self.actions: Tally[str] = Tally()
        self._streaming: SpillStream | None = None  # the spill file of the long output being judged

    def run(self, stream: BinaryIO, fmt: str, on_verdict: Callable[[Verdict], None], *,
            array: bool | None = None, detected: bool = False) -> ReplaySummary:
        """Judge the stream in `fmt`; `detected`: the format was told from the input, not given."""
        if not self.health.by_type:  # nothing judged yet: the recorded agent's own model ladder
            source = recording(fmt)
            self.health = SessionHealth(for_agent(self.config, source.agent, source.ladder))
        health = self.health
        observe = health.observe
        tally = LineTally()
        stopped_at = None
        events = iter_events(stream, fmt, max_line_bytes(self.config, fmt), tally, array=array,
                             sink=self._spill_stream if self.spill and self.spiller else None)
        now = self.now
        for event in events:
            ts = event.ts
            if ts is not None and ts > now:
                now = self.now = ts
            verdicts = observe(event, now)
            if verdicts:
                for verdict in verdicts:
                    if verdict.action == Action.SPILL and type(event) is ToolResult and self.spill:
                        self._spill(verdict, event)
                    self.actions[verdict.action] += 1
                    on_verdict(verdict)
            if self._streaming is not None:  # a streamed output that was not spilled
                self._streaming.discard()
                self._streaming = None
            if verdicts and health.state == "terminated":  # the session ends with a verdict
                stopped_at = event.seq
                break
        events.close()  # the tally is complete once the reader is closed
        summary = self._summary(tally, stopped_at)
        summary.format, summary.detected = fmt, detected
        return summary

    def _spill_stream(self, seq: int) -> TextSink | None:
        """A spill file for a long output, written as it is read (the verdict decides whether it stays)."""
        assert self.spiller is not None
        self._streaming = self.spiller.stream(tool=None, seq=seq)
        return self._streaming.write

    def _spill(self, verdict: Verdict, event: ToolResult) -> None:
        if event.size is not None and self._streaming is not None:  # already written as it came
            result = self._streaming.finish(event.size, event.output, event.tool, time.time())
            self._streaming = None
            verdict.message = result.message
            verdict.evidence.update(path=result.path, size=result.size)
            if result.warning:
                verdict.evidence["warning"] = result.warning
            event.output = result.message
            return
        # the file's time is the wall clock, so retention counts from when it was written
        spill_event(event, verdict, self.spiller, threshold=self.config.spill.threshold_chars,
                    preview_chars=self.config.spill.preview_chars, now=time.time())

    def _summary(self, tally: LineTally, stopped_at: int | None) -> ReplaySummary:
        h = self.health
        return ReplaySummary(
            lines=tally.read,
            ignored=tally.read - tally.judged,
            unit=tally.unit,
            events=h.events,
            by_type=dict(h.by_type),
            verdicts=sum(self.actions.values()),
            by_rule=dict(h.by_rule),
            by_action={str(k): v for k, v in self.actions.items()},
            validation_failures=h.validation_total,
            validation_examples=[{"seq": s, "reason": r} for s, r in list(h.validation_failures)[:50]],
            state=h.state,
            termination=str(h.termination_reason) if h.termination_reason else None,
            stopped_at=stopped_at,
            pending_gates=[g.id for g in h.pending_gates()],
            counters={c.name: [c.value, c.limit] for c in h.counters()},
        )
