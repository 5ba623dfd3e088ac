"""Assistant messages in a row with no tool call between them (their texts may differ)."""

from __future__ import annotations

from collections.abc import Sequence

from .. import messages
from ..config import Config, Repetition
from ..events import AssistantMessage, Event, Iteration, ToolCall
from ..opinion import MONOLOGUE
from ..verdicts import Action, Verdict
from .base import NO_VERDICTS, Counter, Observer, TypedGuard


class MonologueGuard(TypedGuard):
    """Nudges at the `max_monologue`-th message; at twice that, asks a human."""

    name = "monologue"
    handles = (AssistantMessage, ToolCall, Iteration)

    def __init__(self, cfg: Repetition) -> None:
        self.limit = cfg.max_monologue
        self.count = 0

    def configure(self, config: Config) -> None:
        self.limit = config.repetition.max_monologue

    def hook(self, kind: type[Event]) -> Observer | None:
        return self._message if kind is AssistantMessage else self._end

    def _end(self, event: Event, now: float) -> Sequence[Verdict]:
        self.count = 0  # a tool call, or a new iteration (a new prompt), ends the monologue
        return NO_VERDICTS

    def _message(self, event: AssistantMessage, now: float) -> Sequence[Verdict]:
        self.count += 1
        if not self.limit or (self.count != self.limit and self.count != 2 * self.limit):
            return NO_VERDICTS
        evidence = {"count": self.count, "last": messages.clip(event.text, 160)}
        if self.count == self.limit:
            return (Verdict(Action.NUDGE, self.name, f"{self.count} assistant messages with no tool call",
                            message=messages.monologue_nudge(self.count), evidence=evidence, ask=MONOLOGUE),)
        if self.count == 2 * self.limit:
            return (Verdict(Action.GATE, self.name,
                            f"{self.count} assistant messages with no tool call, after a nudge", evidence=evidence,
                            ask=MONOLOGUE),)
        return NO_VERDICTS

    def human_turn(self) -> None:
        self.count = 0

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "repetition", "monologue"):
            self.count = 0

    def counters(self) -> list[Counter]:
        return [Counter("monologue", self.count, self.limit)]
