"""Replay: feed a recorded stream through the engine, offline and deterministically."""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from .supervisor import protocol
from .supervisor.config import Config
from .supervisor.events import Event, InvalidLine, ToolResult
from .supervisor.health import SessionHealth
from .supervisor.lines import Oversized, line_limit, oversized_line, read_lines
from .runtime.spill import Spiller, spill_event
from .supervisor.verdicts import Action, Verdict

FORMATS = ("native", "claude-code", "codex", "codex-app-server", "acp")


def max_line_bytes(config: Config, fmt: str) -> int:
    """The configured limit, or the format's default: recorded formats carry base64 images."""
    return line_limit(config.limits.max_line_bytes, fmt)


def line_parser(fmt: str) -> Callable[[bytes, int], list[Event]]:
    """The function that turns one line of a format into events."""
    if fmt == "native":
        return lambda line, seq: [protocol.parse_line(line, seq)]
    if fmt == "claude-code":
        from .sessions.claude_code import ClaudeCodeParser

        return ClaudeCodeParser().parse_line
    if fmt == "codex":
        from .sessions.codex import CodexParser

        return CodexParser().parse_line
    if fmt == "codex-app-server":
        from .sessions.codex_app import AppServerParser

        return AppServerParser().parse_line
    if fmt == "acp":
        from .sessions.acp import AcpParser

        return AcpParser().parse_line
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def iter_events(stream: BinaryIO, fmt: str, limit: int) -> Iterator[Event]:
    """Every event of a stream, with over-long lines as InvalidLine."""
    if fmt == "native":
        parse_native = protocol.parse_line
        for seq, line in read_lines(stream, limit):
            if type(line) is Oversized:
                yield oversized_line(seq, line, limit)
            else:
                yield parse_native(line, seq)
        return
    if fmt == "claude-code" and _starts_with_array(stream):
        from .sessions.claude_code import parse_array

        data = stream.read(limit + 1)  # a JSON array (the claude-code-action fixture shape), bounded
        if len(data) > limit:
            yield InvalidLine(seq=1, reason=f"JSON array longer than {limit:,} bytes", preview=protocol.preview(data))
            return
        yield from parse_array(data)
        return
    parse = line_parser(fmt)
    for seq, line in read_lines(stream, limit):
        if type(line) is Oversized:
            yield oversized_line(seq, line, limit)
        else:
            yield from parse(line, seq)


def _starts_with_array(stream: BinaryIO) -> bool:
    """Whether the stream's first non-blank byte is '[' (peeked, nothing consumed)."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return False
    head = peek(256)[:256].lstrip()
    return head[:1] == b"["





@dataclass
class ReplaySummary:
    lines: int = 0
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

    def run(self, stream: BinaryIO, fmt: str, on_verdict: Callable[[Verdict], None]) -> ReplaySummary:
        health = self.health
        observe = health.observe
        last_seq = 0
        stopped_at = None
        for event in iter_events(stream, fmt, max_line_bytes(self.config, fmt)):
            last_seq = event.seq
            if event.ts is not None and event.ts > self.now:
                self.now = event.ts
            verdicts = observe(event, self.now)
            for verdict in verdicts:
                if verdict.action == Action.SPILL and type(event) is ToolResult and self.spill:
                    self._spill(verdict, event)
                self.actions[verdict.action] += 1
                on_verdict(verdict)
            if health.state == "terminated":
                stopped_at = event.seq
                break
        return self._summary(last_seq, stopped_at)

    def _spill(self, verdict: Verdict, event: ToolResult) -> None:
        # the file's time is the wall clock, so retention counts from when it was written
        spill_event(event, verdict, self.spiller, threshold=self.config.spill.threshold_chars,
                    preview_chars=self.config.spill.preview_chars, now=time.time())

    def _summary(self, last_seq: int, stopped_at: int | None) -> ReplaySummary:
        h = self.health
        return ReplaySummary(
            lines=last_seq,
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
