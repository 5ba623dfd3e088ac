"""Identical consecutive tool calls: nudge, then block, then terminate.

An identical call whose output keeps changing (polling, paging) is progress for a while; past a
ceiling it is nudged, then gated, as the rule `polling`: otherwise an agent listing a directory whose
log keeps growing would poll it forever with no verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from .. import messages
from ..config import Config, Repetition
from ..events import Event, ToolCall, ToolResult
from ..opinion import POLL
from ..signature import OutputKey, first_difference, output_key, output_shape, same_output
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, BlockLedger, Counter, Observer, TypedGuard


_CLASSIFY_FROM: Final = 3  # a call repeated once with a new output is common; outputs are normalised for longer runs


def result_matches(result: ToolResult, call_id: str | None, tool: str | None) -> bool:
    """Whether a result answers the call with this id and tool (absent ids match by tool)."""
    if result.call_id is not None and call_id is not None:
        return result.call_id == call_id
    return result.tool is None or result.tool == tool


class RepetitionGuard(TypedGuard):
    """Counts a streak of calls with the same canonical signature.

    A success whose output differs from the streak's previous successful output
    (paging, polling a build) is progress, and starts the streak over; errors
    never count as progress. The run of identical calls (`run`) is not started
    over by a changed output: it is what the polling ceiling counts.
    """

    name = "repetition"
    polling = "polling"
    handles = (ToolCall, ToolResult)

    def __init__(self, cfg: Repetition, ledger: BlockLedger) -> None:
        self.cfg = cfg
        self.ledger = ledger
        self._clear()

    def _clear(self) -> None:
        self.sig: int | None = None
        self.tool: str | None = None
        self.args: dict[str, Any] = {}
        self.call_id: str | None = None
        self.streak = 0
        self.last_ok_key: OutputKey | None = None  # digested only if the same call comes again (and then only if long)
        self.last_result: ToolResult | None = None
        self.nudge_due = False
        self.nudged = False
        self.run = 0  # identical calls in a row, whatever their outputs
        self.volatile_changes = 0  # outputs that changed only in numbers, sizes, times, ids, temp paths
        self.content_changes = 0
        self.last_ok_output: str | None = None
        self.last_ok_shape: bytes | None = None
        self.change: tuple[str, str] = ("", "")  # the first differing line of the last change, before and after
        self.poll_nudged = self.poll_gated = False

    def configure(self, config: Config) -> None:
        self.cfg = config.repetition

    def hook(self, kind: type[Event]) -> Observer | None:
        return self._call if kind is ToolCall else self._result

    def _call(self, call: ToolCall, now: float) -> Sequence[Verdict]:
        out: list[Verdict] = [self._nudge()] if self.nudge_due else []
        if call.sig == self.sig:
            self.streak += 1
            self.run += 1
        else:
            self._clear()
            self.sig, self.tool, self.args, self.streak, self.run = call.sig, call.tool, call.args, 1, 1
            self.call_id = call.call_id
            if not out and self.cfg.nudge_after != 1:
                return NO_VERDICTS  # a first call: only a nudge after one call could be due (the rest need two)
        self.call_id = call.call_id
        gate_after = self.cfg.progress_gate_after
        if (gate_after and self.run > gate_after and not self.poll_gated and self.changes
                and self.ledger.blocked_seq != call.seq and self.streak <= (self.cfg.max_identical_calls or self.run)):
            self.poll_gated = True
            out.append(self._polling(Action.GATE))
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

    def _result(self, result: ToolResult, now: float) -> Sequence[Verdict]:
        if self.sig is None or not result_matches(result, self.call_id, self.tool):
            return NO_VERDICTS
        exit_code = result.exit_code
        failed = result.is_error or (exit_code is not None and exit_code != 0)  # result.failed, written out
        out: Sequence[Verdict] = NO_VERDICTS
        if not failed:
            key = output_key(result)
            last = self.last_ok_key
            if last is not None and not same_output(key, last):
                self.streak, self.nudged, self.nudge_due = 1, False, False  # new output: paging or polling
                if self.run >= _CLASSIFY_FROM:
                    self._changed(result.output)
                nudge_after = self.cfg.progress_nudge_after
                if nudge_after and self.run >= nudge_after and not self.poll_nudged:
                    self.poll_nudged = True
                    out = (self._polling(Action.NUDGE),)
            self.last_ok_key = key
            self.last_ok_output = result.output
        self.last_result = result
        if self.nudge_due:
            return (*out, self._nudge())
        return out

    @property
    def changes(self) -> int:
        """Changes classified so far (from the `_CLASSIFY_FROM`-th call of the run on)."""
        return self.volatile_changes + self.content_changes

    def _changed(self, output: str) -> None:
        """Tell a change in volatile parts only from one in content (outputs normalised as error lines are)."""
        before = self.last_ok_output or ""
        if self.last_ok_shape is None:
            self.last_ok_shape = output_shape(before)
        shape = output_shape(output)
        if shape == self.last_ok_shape:
            self.volatile_changes += 1
        else:
            self.content_changes += 1
        self.last_ok_shape = shape
        self.change = (before, output)

    def _polling(self, action: Action) -> Verdict:
        """The ceiling on the progress exemption: a nudge, then a gate, with what changed between outputs."""
        tool = self.tool or "?"
        volatile_only = self.content_changes == 0
        before, after = first_difference(*self.change)
        evidence = {"tool": tool, "args": messages.show_args(self.args), "count": self.run,
                    "changed": "volatile" if volatile_only else "content",
                    "volatile_changes": self.volatile_changes, "content_changes": self.content_changes,
                    "before": before, "after": after}
        what = "only numbers, sizes or times changed" if volatile_only else "content changed"
        reason = f"{tool} called {self.run}x with identical arguments; its output kept changing ({what})"
        if action == Action.NUDGE:
            text = messages.polling_nudge(tool, self.args, self.run, volatile_only)
        else:
            text = messages.polling_gate(tool, self.run, volatile_only)
            reason = f"{tool} called over {self.cfg.progress_gate_after}x with identical arguments and changing output"
        return Verdict(action, self.polling, reason, message=text, evidence=evidence, ask=POLL)  # ambiguous

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
        if counter in (None, "repetition", "identical_calls", "polling"):
            self._clear()

    def counters(self) -> list[Counter]:
        return [Counter("identical_calls", self.streak, self.cfg.max_identical_calls),
                Counter("polling", self.run if self.changes else 0, self.cfg.progress_gate_after)]
