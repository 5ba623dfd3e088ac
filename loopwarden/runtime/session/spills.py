"""A live session's large tool outputs: spilled to files (runtime/spill.py), long ones written as they come."""

from __future__ import annotations

from ...sessions.base import Adapter
from ...supervisor.config import Config
from ...supervisor.events import SpillResult, ToolResult
from ...supervisor.lines import TextSink
from ...supervisor.verdicts import Verdict
from ..spill import Spiller, SpillStream, spill_event, spill_streamed
from .journal import Journal


class Spills:
    """The spill files of one session: the output a spill verdict names, written to a file and cut in the event; a
    long output (supervisor/longline.py) written to its file as it arrives, kept if the engine spills it."""

    def __init__(self, spiller: Spiller | None, journal: Journal) -> None:
        self.spiller = spiller
        self.journal = journal
        self.failures = 0  # spills that could not be written: the agent got the truncated text
        self.last: SpillResult | None = None  # the last spill, for the line that tells the agent (`line`)
        self._streams: dict[int, SpillStream] | None = None  # line -> the spill file its long output is written to

    def open_stream(self, seq: int) -> TextSink:
        """Where the long output of line `seq` goes as it arrives."""
        if self.spiller is None:
            return _ignore_text
        if self._streams is None:
            self._streams = {}
        stream = self._streams[seq] = self.spiller.stream(tool=None, seq=seq)
        return stream.write

    def drop_stream(self, seq: int) -> None:
        """Line `seq`'s output was not spilled (or not a tool_result): its file goes."""
        stream = self._streams.pop(seq, None) if self._streams else None
        if stream is not None:
            stream.discard()

    def drop_streams(self) -> None:
        """The reading stopped or failed: long lines cut short lose their files."""
        for seq in list(self._streams or ()):
            self.drop_stream(seq)

    def spill(self, verdict: Verdict, event: ToolResult, config: Config, now: float) -> None:
        """Carry out a spill verdict on `event` before it is recorded: its output goes to a file, the event keeps
        a notice in its place."""
        stream = self._streams.pop(event.seq, None) if self._streams and event.size is not None else None
        if stream is not None:  # a long output, written as it came
            result = spill_streamed(event, verdict, stream, now=now)
        else:
            result = spill_event(event, verdict, self.spiller, threshold=config.spill.threshold_chars,
                                 preview_chars=config.spill.preview_chars, now=now)
        self.last = result
        if result.warning and not result.path and self.spiller is not None:
            self.failures += 1  # a full disk or an unusable directory: the agent got the truncated text
            self.journal.report(result.warning, error=True)
        if result.path and result.saved:  # (an output cut whole has only the notice's path)
            self.journal.sink("spill", {"seq": event.seq, "ts": now, "tool": event.tool, "path": result.path,
                                        "size": result.size})

    def line(self, adapter: Adapter, event: ToolResult) -> bytes | None:
        """What tells the agent where its output went, if anything."""
        return adapter.spill_line(event, self.last) if self.last is not None else None


def _ignore_text(text: str) -> None:
    """A long output's text when there is no spill directory: only its first part is kept (in the event)."""
