"""Consecutive failures: tool errors and error events with no success between."""

from __future__ import annotations

from collections.abc import Sequence

from .. import kinds, messages
from ..config import Config, Failures
from ..events import Error, Event, ToolResult
from ..verdicts import Termination, Verdict, terminate
from .base import NO_VERDICTS, Counter, Guard


class FailuresGuard(Guard):
    name = "consecutive_failures"
    handles = (ToolResult, Error)

    def __init__(self, cfg: Failures) -> None:
        self.limit = cfg.max_consecutive
        self.count = 0

    def configure(self, config: Config) -> None:
        self.limit = config.failures.max_consecutive

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        # not event.failed, written out (see ToolResult.failed)
        if type(event) is kinds.TOOL_RESULT and not (event.is_error or (event.exit_code is not None
                                                                       and event.exit_code != 0)):
            self.count = 0
            return NO_VERDICTS
        self.count += 1
        if self.limit and self.count >= self.limit:
            if type(event) is kinds.TOOL_RESULT:
                last = messages.outcome(event.output, True)
            else:
                assert type(event) is kinds.ERROR
                last = "error: " + messages.clip(event.message, 160)
            return (terminate(self.name, Termination.CONSECUTIVE_FAILURES,
                              messages.failures_terminate(self.count, last), count=self.count, last=last),)
        return NO_VERDICTS

    def human_turn(self) -> None:
        self.count = 0

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "failures", "consecutive_failures"):
            self.count = 0

    def counters(self) -> list[Counter]:
        return [Counter("failures", self.count, self.limit)]
