"""Wall clock: a stall nudge after silence, a hard max_runtime."""

from __future__ import annotations

from collections.abc import Sequence

from .. import messages
from ..config import Config, Limits
from ..events import Done, Event, ResourceSample, SystemNudge, ToolCall, ToolResult
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, Counter, Observer, TypedGuard


class RuntimeGuard(TypedGuard):
    """Every event is activity; `tick` judges the time since start and since the last event."""

    name = "runtime"
    handles = (Event,)

    def __init__(self, cfg: Limits, started_at: float | None = None) -> None:
        self.cfg = cfg
        self.started_at = started_at
        self.last_activity = started_at
        self.now = started_at or 0.0
        self.last_tool: str | None = None
        self.last_result: ToolResult | None = None
        self.stalled = False
        self.finished = False
        self.waiting_on_human = False

    def configure(self, config: Config) -> None:
        self.cfg = config.limits

    def hook(self, kind: type[Event]) -> Observer | None:
        if kind is ResourceSample or kind is SystemNudge:
            return None  # a sample or an injected nudge is not the agent doing something
        if kind is ToolCall:
            return self._call
        if kind is ToolResult:
            return self._result
        return self._done if kind is Done else self._activity

    def _activity(self, event: Event, now: float) -> Sequence[Verdict]:
        self.last_activity = now
        self.stalled = False
        return NO_VERDICTS

    # SessionHealth.observe writes `_call` and `_result` out for calls and results (health._FUSED): keep them alike
    def _call(self, call: ToolCall, now: float) -> Sequence[Verdict]:
        self.last_activity = now
        self.stalled = False
        self.last_tool, self.last_result = call.tool, None
        return NO_VERDICTS

    def _result(self, result: ToolResult, now: float) -> Sequence[Verdict]:
        self.last_activity = now
        self.stalled = False
        self.last_result = result
        return NO_VERDICTS

    def _done(self, event: Event, now: float) -> Sequence[Verdict]:
        self.last_activity = now
        self.stalled = False
        self.finished = True
        return NO_VERDICTS

    @property
    def last_outcome(self) -> str:
        """The last tool's outcome, formatted only when a message needs it."""
        result = self.last_result
        return "no result yet" if result is None else messages.outcome(result.output, result.failed)

    def quiet_until(self, now: float) -> bool:
        """True when `tick(now)` certainly has nothing to say (the hot path's shortcut)."""
        started = self.started_at
        if started is None:
            return False
        limit = self.cfg.max_runtime
        if limit and now - started >= limit:
            return False
        stall = self.cfg.stall_timeout
        return not stall or self.stalled or self.finished or now - (self.last_activity or started) < stall

    def tick(self, now: float) -> Sequence[Verdict]:
        if self.started_at is None:
            self.started_at = self.last_activity = now
        self.now = now
        elapsed = now - self.started_at
        limit = self.cfg.max_runtime
        if limit and elapsed >= limit:
            return (terminate(self.name, Termination.MAX_RUNTIME, messages.max_runtime(limit),
                              elapsed=round(elapsed, 3), limit=limit),)
        stall = self.cfg.stall_timeout
        assert self.last_activity is not None
        silent = now - self.last_activity
        if stall and not self.stalled and not self.finished and not self.waiting_on_human and silent >= stall:
            self.stalled = True
            text = messages.stall_nudge(silent, self.last_tool, self.last_outcome)
            return (Verdict(Action.NUDGE, "stall", f"no activity for {silent:.1f}s", message=text,
                            evidence={"silent": round(silent, 3), "last_tool": self.last_tool,
                                      "last_outcome": self.last_outcome}),)
        return NO_VERDICTS

    def next_deadline(self) -> float | None:
        """When `tick` could next have something to say (None: nothing is scheduled)."""
        if self.started_at is None:
            return None
        candidates = []
        if self.cfg.max_runtime:
            candidates.append(self.started_at + self.cfg.max_runtime)
        stall = self.cfg.stall_timeout
        if stall and not self.stalled and not self.finished and not self.waiting_on_human and self.last_activity:
            candidates.append(self.last_activity + stall)
        return min(candidates) if candidates else None

    def counters(self, now: float | None = None) -> list[Counter]:
        """Runtime and silence as of the last event or tick, or as of `now` (a quiet session has no events
        to move them, and a status should not lag behind its own clock)."""
        now = self.now if now is None else max(self.now, now)
        elapsed = 0.0 if self.started_at is None else now - self.started_at
        silent = 0.0 if self.last_activity is None else max(0.0, now - self.last_activity)
        return [Counter("runtime", round(elapsed, 1), self.cfg.max_runtime),
                Counter("silence", round(silent, 1), self.cfg.stall_timeout)]
