"""What the agent itself asks for: a human gate, and large outputs to be spilled."""

from __future__ import annotations

from collections.abc import Sequence

from .. import kinds, messages
from ..config import Spill
from ..events import Event, GateRequest, ToolResult
from ..verdicts import Action, Verdict
from .base import NO_VERDICTS, Guard, Observer


class GateRequestGuard(Guard):
    """The agent asks a human to approve something: open a gate with its reason."""

    name = "gate_request"
    handles = (GateRequest,)

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        assert isinstance(event, kinds.GATE_REQUEST)
        return (Verdict(Action.GATE, self.name, "agent asks: " + messages.clip(event.reason, 300),
                        evidence={"request": event.reason}),)


class LargeOutputGuard(Guard):
    """A tool output over the threshold becomes a spill verdict; the shell writes the file."""

    name = "large_output"
    handles = (ToolResult,)

    def __init__(self, cfg: Spill) -> None:
        self.threshold = cfg.threshold_chars

    def hook(self, kind: type[Event]) -> Observer | None:
        return self.observe if self.threshold else None  # no threshold: nothing is ever spilled

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        assert isinstance(event, kinds.TOOL_RESULT)
        size = len(event.output) if event.size is None else event.size  # a streamed output: only its start is kept
        if not self.threshold or size <= self.threshold:
            return NO_VERDICTS
        tool = event.tool or "tool"
        return (Verdict(Action.SPILL, self.name, f"output of {messages.clip(tool, 60)} is {size:,} characters",
                        evidence={"tool": tool, "size": size, "call_id": event.call_id}),)
