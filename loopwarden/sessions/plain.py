"""Any command: its output lines are shown and stored; runtime, stall, output and process limits apply."""

from __future__ import annotations

from ..supervisor.events import Event, Output
from .base import Adapter, Capability


class PlainAdapter(Adapter):
    name = "plain"
    listed = 2
    agent = "command"
    summary = "any command: its output lines are shown and stored; signals only"
    declared = Capability.NONE
    keepable = True  # (see Adapter.keepable)

    def parse_stdout(self, raw: bytes, seq: int) -> list[Event]:
        return [Output(seq=seq, text=raw.decode("utf-8", "replace"), stream="stdout", size=len(raw) + 1)]

    def parse_stderr(self, raw: bytes, seq: int) -> list[Event]:
        return [Output(seq=seq, text=raw.decode("utf-8", "replace"), stream="stderr", size=len(raw) + 1)]
