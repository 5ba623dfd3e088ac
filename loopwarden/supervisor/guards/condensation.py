"""Back-to-back context condensations with no work between them: condensing frees no room (OpenHands)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .. import messages
from ..config import Config
from ..events import AssistantMessage, Condensation, Event, Output, ToolCall, ToolResult
from ..verdicts import Action, Verdict
from .base import NO_VERDICTS, Counter, Guard

_WORK: Final = tuple(kind.kind for kind in (ToolCall, ToolResult, AssistantMessage, Output))


class CondensationGuard(Guard):
    """Counts condensations in a row; a tool call, a result, a message or output in between is work.

    OpenHands' `context_window_error` fires at 10 such condensations and pauses the agent: here a gate.
    Work is read from the session's tally of events by type when a condensation arrives, so the
    guard costs nothing on the events between.
    """

    name = "condensation"
    handles = (Condensation,)

    def __init__(self, config: Config, by_type: dict[str, int]) -> None:
        self.limit = config.condensation.max_in_a_row
        self.by_type = by_type
        self.work = -1
        self.count = 0
        self.first_seq = 0

    def configure(self, config: Config) -> None:
        self.limit = config.condensation.max_in_a_row

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        count = self.by_type.get
        call, result, message, output = _WORK
        work = count(call, 0) + count(result, 0) + count(message, 0) + count(output, 0)  # (no generator per event)
        if work != self.work:
            self.work, self.count = work, 0
        self.count += 1
        if self.count == 1:
            self.first_seq = event.seq
        if not self.limit or self.count != self.limit:
            return NO_VERDICTS
        evidence = {"count": self.count, "first_seq": self.first_seq,
                    "last": messages.clip(event.text or "", 160)}  # type: ignore[attr-defined]
        return (Verdict(Action.GATE, self.name, f"{self.count} context condensations in a row with no work between",
                        message=messages.condensation_gate(self.count), evidence=evidence),)

    def human_turn(self) -> None:
        self.count = 0

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "condensation"):
            self.count = 0

    def counters(self) -> list[Counter]:
        return [Counter("condensation", self.count, self.limit)]
