"""Consecutive validation failures: malformed lines or model output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .. import kinds, messages
from ..config import Config, Validation
from ..events import (AssistantMessage, Done, Event, InvalidLine, Output, ResourceSample, ToolCall, ToolResult,
                      ValidationError)
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, Counter, Observer, TypedGuard

_STEPS: Final = (ToolResult, AssistantMessage, Done)


class ValidationGuard(TypedGuard):
    """A valid step resets the count; a tool_call answered by a validation_error does not."""

    name = "validation"
    handles = (Event,)

    def __init__(self, cfg: Validation) -> None:
        self.limit = cfg.max_consecutive
        self.count = 0
        self.total = 0
        self.call_pending = False

    def configure(self, config: Config) -> None:
        self.limit = config.validation.max_consecutive

    def hook(self, kind: type[Event]) -> Observer | None:
        if kind is ResourceSample or kind is Output:
            return None
        if kind is InvalidLine or kind is ValidationError:
            return self._invalid
        if kind is ToolCall:
            return self._call
        return self._step if kind in _STEPS else self._other

    def _invalid(self, event: Event, now: float) -> Sequence[Verdict]:
        self.call_pending = False
        self.count += 1
        self.total += 1
        return self._failure(event)

    # a valid step resets the count; so does anything but a validation error after a call (the call was valid).
    # SessionHealth.observe writes `_step` (for a result) and `_call` out for calls and results (health._FUSED).
    def _step(self, event: Event, now: float) -> Sequence[Verdict]:
        self.count = 0
        self.call_pending = False
        return NO_VERDICTS

    def _call(self, event: Event, now: float) -> Sequence[Verdict]:
        if self.call_pending:
            self.count = 0
        self.call_pending = True
        return NO_VERDICTS

    def _other(self, event: Event, now: float) -> Sequence[Verdict]:
        if self.call_pending:
            self.count = 0
            self.call_pending = False
        return NO_VERDICTS

    def _failure(self, event: Event) -> Sequence[Verdict]:
        if type(event) is kinds.INVALID_LINE:
            description = f"line {event.seq}: {event.reason}"
        else:
            assert type(event) is kinds.VALIDATION_ERROR
            description = messages.clip(event.message, 200)
        evidence = {"count": self.count, "description": description}
        if self.limit and self.count >= self.limit:
            text = messages.validation_terminate(self.count, description)
            return (terminate(self.name, Termination.VALIDATION_FAILURE, text, **evidence),)
        text = messages.validation_nudge(description, self.count, self.limit)
        return (Verdict(Action.NUDGE, self.name, f"validation failure {self.count}/{self.limit}: {description}",
                        message=text, evidence=evidence),)

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "validation"):
            self.count = 0

    def counters(self) -> list[Counter]:
        return [Counter("validation", self.count, self.limit)]
