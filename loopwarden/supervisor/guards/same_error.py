"""The same error from one tool, whatever its arguments: block its next call."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from .. import messages
from ..config import Config, Repetition
from ..events import Event, ToolCall, ToolResult
from ..signature import error_fingerprint
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, BlockLedger, Counter, Observer, TypedGuard

_MAX_TRACKED: Final = 512
_PENDING_CHARS: Final = 256 * 1024  # error outputs held unfingerprinted, over all tools; past it they are fingerprinted


class _Streak:
    """One tool's failures in a row: the fingerprint and count of those already fingerprinted, then the
    outputs not yet fingerprinted (a fingerprint is eleven regex passes; most streaks end before the limit)."""

    __slots__ = ("count", "fingerprint", "pending")

    def __init__(self) -> None:
        self.fingerprint: str | None = None
        self.count = 0
        self.pending: list[str] = []


class SameErrorGuard(TypedGuard):
    """Per tool, a streak of identical error fingerprints; a success of that tool clears it."""

    name = "same_error"
    handles = (ToolCall, ToolResult)

    def __init__(self, cfg: Repetition, ledger: BlockLedger) -> None:
        self.cfg = cfg
        self.ledger = ledger
        self.streaks: OrderedDict[str, _Streak] = OrderedDict()
        self.pending_chars = 0
        self.armed: dict[str, tuple[str, int]] = {}
        self.tools_by_call: OrderedDict[str, str] = OrderedDict()
        self.last_tool: str | None = None

    def configure(self, config: Config) -> None:
        self.cfg = config.repetition

    def hook(self, kind: type[Event]) -> Observer | None:
        return self._call if kind is ToolCall else self._result

    def _call(self, call: ToolCall, now: float) -> Sequence[Verdict]:
        self.last_tool = tool = call.tool
        call_id = call.call_id
        if call_id is not None:  # remembered as most recent, the oldest dropped past the bound
            table = self.tools_by_call
            if call_id in table:  # a new id is inserted last already (call ids are usually new)
                table.move_to_end(call_id)
            table[call_id] = tool
            if len(table) > _MAX_TRACKED:
                table.popitem(last=False)
        armed = self.armed.pop(tool, None) if self.armed else None  # usually none is armed
        if armed is None or self.ledger.blocked_seq == call.seq:
            return NO_VERDICTS
        fingerprint, count = armed
        self._forget(call.tool)
        evidence = {"tool": call.tool, "fingerprint": fingerprint, "count": count, "blocks": self.ledger.count}
        if self.ledger.exhausted():
            text = messages.repetition_terminate(call.tool, count, self.ledger.count)
            return (terminate(self.name, Termination.REPETITION_LOOP, text, **evidence),)
        self.ledger.add(call.seq)
        reason = f"{call.tool} returned the same error {count}x (block {self.ledger.count}/{self.ledger.max_blocks})"
        text = messages.same_error_block(call.tool, count, fingerprint)
        return (Verdict(Action.BLOCK, self.name, reason, message=text, evidence=evidence),)

    def _result(self, result: ToolResult, now: float) -> Sequence[Verdict]:
        """A result gives no verdict: it arms the block of the tool's next call."""
        tool = result.tool
        if tool is None and result.call_id is not None:
            tool = self.tools_by_call.get(result.call_id)
        tool = tool or self.last_tool
        if tool is None:
            return NO_VERDICTS
        exit_code = result.exit_code
        if not (result.is_error or (exit_code is not None and exit_code != 0)):  # not result.failed, written out
            if self.streaks:  # usually no tool has a streak of failures going: nothing to forget
                self._forget(tool)
            if self.armed:
                self.armed.pop(tool, None)
            return NO_VERDICTS
        streaks = self.streaks
        streak = streaks.get(tool)
        if streak is None:
            streak = streaks[tool] = _Streak()
            if len(streaks) > _MAX_TRACKED:
                self._forget(next(iter(streaks)))
        else:
            streaks.move_to_end(tool)
        streak.pending.append(result.output)
        self.pending_chars += len(result.output)
        limit = self.cfg.max_same_error
        # the count can reach the limit only if every failure in a row so far has the same fingerprint: until
        # the failures in a row reach the limit, no fingerprint is needed (the same errors in the same order
        # give the same fingerprints and counts whenever they are worked out)
        if streak.count + len(streak.pending) < limit and self.pending_chars <= _PENDING_CHARS:
            return NO_VERDICTS
        self._fingerprint(tool, streak)
        if self.pending_chars > _PENDING_CHARS:  # other tools' streaks hold the rest
            self._fingerprint_all()
        if limit and streak.count >= limit:
            assert streak.fingerprint is not None
            self.armed[tool] = (streak.fingerprint, streak.count)
        return NO_VERDICTS

    def _fingerprint(self, tool: str, streak: _Streak) -> None:
        """Fingerprint the streak's pending outputs in order, counting the identical ones in a row."""
        for output in streak.pending:
            fingerprint = error_fingerprint(tool, output)
            streak.count = streak.count + 1 if fingerprint == streak.fingerprint else 1
            streak.fingerprint = fingerprint
            self.pending_chars -= len(output)
        streak.pending.clear()

    def _fingerprint_all(self) -> None:
        for tool, streak in self.streaks.items():
            if streak.pending:
                self._fingerprint(tool, streak)

    def _forget(self, tool: str) -> None:
        streak = self.streaks.pop(tool, None)
        if streak is not None and streak.pending:
            self.pending_chars -= sum(len(output) for output in streak.pending)

    def _clear(self) -> None:
        self.streaks.clear()
        self.armed.clear()
        self.pending_chars = 0

    def human_turn(self) -> None:
        self._clear()

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "repetition", "same_error"):
            self._clear()

    def counters(self) -> list[Counter]:
        self._fingerprint_all()
        worst = max((streak.count for streak in self.streaks.values()), default=0)
        return [Counter("same_error", worst, self.cfg.max_same_error)]
