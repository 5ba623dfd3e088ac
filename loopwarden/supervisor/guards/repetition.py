"""Identical consecutive tool calls: nudge, then block, then terminate (seeds 000 and 003)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import messages
from ..config import Config, Repetition
from ..events import Event, ToolCall, ToolResult
from ..signature import result_digest
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, BlockLedger, Counter, Guard


def result_matches(result: ToolResult, call_id: str | None, tool: str | None) -> bool:
    """Whether a result answers the call with this id and tool (absent ids match by tool)."""
    if result.call_id is not None and call_id is not None:
        return result.call_id == call_id
    return result.tool is None or result.tool == tool


class RepetitionGuard(Guard):
    """Counts a streak of calls with the same canonical signature.

    A success whose output differs from the streak's previous successful output
    (paging, polling a build) is progress, and starts the streak over; errors
    never count as progress.
    """

    name = "repetition"
    handles = (ToolCall, ToolResult)

    def __init__(self, cfg: Repetition, ledger: BlockLedger) -> None:
        self.cfg = cfg
        self.ledger = ledger
        self._clear()

    def _clear(self) -> None:
        self.sig: bytes | None = None
        self.tool: str | None = None
        self.args: dict[str, Any] = {}
        self.call_id: str | None = None
        self.streak = 0
        self.last_ok_digest: bytes | None = None
        self.last_result: ToolResult | None = None
        self.nudge_due = False
        self.nudged = False

    def configure(self, config: Config) -> None:
        self.cfg = config.repetition

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        if type(event) is ToolCall:
            return self._call(event)
        assert isinstance(event, ToolResult)
        return self._result(event)

    def _call(self, call: ToolCall) -> Sequence[Verdict]:
        out: list[Verdict] = []
        if self.nudge_due:
            out.append(self._nudge())
        if call.sig == self.sig:
            self.streak += 1
        else:
            self._clear()
            self.sig, self.tool, self.args, self.streak = call.sig, call.tool, call.args, 1
        self.call_id = call.call_id
        limit = self.cfg.max_identical_calls
        if limit and self.streak > limit and self.ledger.blocked_seq != call.seq:
            evidence = {"tool": call.tool, "args": messages.show_args(call.args), "count": self.streak,
                        "last_outcome": self.last_outcome, "blocks": self.ledger.count}
            if self.ledger.exhausted():
                text = messages.repetition_terminate(call.tool, self.streak, self.ledger.count)
                out.append(terminate(self.name, Termination.REPETITION_LOOP, text, **evidence))
            else:
                self.ledger.add(call.seq)
                text = messages.repetition_block(call.tool, call.args, self.streak, self.last_outcome)
                reason = (f"{call.tool} called {self.streak}x with identical arguments "
                          f"(block {self.ledger.count}/{self.ledger.max_blocks})")
                out.append(Verdict(Action.BLOCK, self.name, reason, message=text, evidence=evidence))
        elif self.cfg.nudge_after and self.streak >= self.cfg.nudge_after and not self.nudged:
            self.nudge_due = self.nudged = True
        return out or NO_VERDICTS

    def _result(self, result: ToolResult) -> Sequence[Verdict]:
        if self.sig is None or not result_matches(result, self.call_id, self.tool):
            return NO_VERDICTS
        failed = result.failed
        if not failed:
            digest = result_digest(result)
            if self.last_ok_digest is not None and digest != self.last_ok_digest:
                self.streak, self.nudged, self.nudge_due = 1, False, False  # new output: paging or polling
            self.last_ok_digest = digest
        self.last_result = result
        if self.nudge_due:
            return (self._nudge(),)
        return NO_VERDICTS

    def _nudge(self) -> Verdict:
        self.nudge_due = False
        tool = self.tool or "?"
        text = messages.repetition_nudge(tool, self.args, self.streak, self.last_outcome)
        return Verdict(
            Action.NUDGE, self.name, f"{tool} called {self.streak}x with identical arguments", message=text,
            evidence={"tool": tool, "args": messages.show_args(self.args), "count": self.streak,
                      "last_outcome": self.last_outcome},
        )

    @property
    def last_outcome(self) -> str:
        """The streak's last outcome, formatted only when a message needs it."""
        result = self.last_result
        return "no result yet" if result is None else messages.outcome(result.output, result.failed)

    def human_turn(self) -> None:
        self._clear()

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "repetition", "identical_calls"):
            self._clear()

    def counters(self) -> list[Counter]:
        return [Counter("identical_calls", self.streak, self.cfg.max_identical_calls)]
