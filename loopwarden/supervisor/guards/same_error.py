"""The same error from one tool, whatever its arguments: block its next call (Goose REP-002)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TypeVar

from .. import messages
from ..config import Config, Repetition
from ..events import Event, ToolCall, ToolResult
from ..signature import error_fingerprint
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, BlockLedger, Counter, Guard

_MAX_TRACKED = 512


class SameErrorGuard(Guard):
    """Per tool, a streak of identical error fingerprints; a success of that tool clears it."""

    name = "same_error"
    handles = (ToolCall, ToolResult)

    def __init__(self, cfg: Repetition, ledger: BlockLedger) -> None:
        self.cfg = cfg
        self.ledger = ledger
        self.streaks: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self.armed: dict[str, tuple[str, int]] = {}
        self.tools_by_call: OrderedDict[str, str] = OrderedDict()
        self.last_tool: str | None = None

    def configure(self, config: Config) -> None:
        self.cfg = config.repetition

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        if type(event) is ToolCall:
            return self._call(event)
        assert isinstance(event, ToolResult)
        self._result(event)
        return NO_VERDICTS

    def _call(self, call: ToolCall) -> Sequence[Verdict]:
        self.last_tool = call.tool
        if call.call_id is not None:
            _remember(self.tools_by_call, call.call_id, call.tool)
        armed = self.armed.pop(call.tool, None)
        if armed is None or self.ledger.blocked_seq == call.seq:
            return NO_VERDICTS
        fingerprint, count = armed
        self.streaks.pop(call.tool, None)
        evidence = {"tool": call.tool, "fingerprint": fingerprint, "count": count, "blocks": self.ledger.count}
        if self.ledger.exhausted():
            text = messages.repetition_terminate(call.tool, count, self.ledger.count)
            return (terminate(self.name, Termination.REPETITION_LOOP, text, **evidence),)
        self.ledger.add(call.seq)
        reason = f"{call.tool} returned the same error {count}x (block {self.ledger.count}/{self.ledger.max_blocks})"
        text = messages.same_error_block(call.tool, count, fingerprint)
        return (Verdict(Action.BLOCK, self.name, reason, message=text, evidence=evidence),)

    def _result(self, result: ToolResult) -> None:
        tool = result.tool
        if tool is None and result.call_id is not None:
            tool = self.tools_by_call.get(result.call_id)
        tool = tool or self.last_tool
        if tool is None:
            return
        if not result.failed:
            self.streaks.pop(tool, None)
            self.armed.pop(tool, None)
            return
        fingerprint = error_fingerprint(tool, result.output)
        previous = self.streaks.get(tool)
        count = previous[1] + 1 if previous and previous[0] == fingerprint else 1
        _remember(self.streaks, tool, (fingerprint, count))
        limit = self.cfg.max_same_error
        if limit and count >= limit:
            self.armed[tool] = (fingerprint, count)

    def _clear(self) -> None:
        self.streaks.clear()
        self.armed.clear()

    def human_turn(self) -> None:
        self._clear()

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "repetition", "same_error"):
            self._clear()

    def counters(self) -> list[Counter]:
        worst = max((count for _, count in self.streaks.values()), default=0)
        return [Counter("same_error", worst, self.cfg.max_same_error)]


V = TypeVar("V")


def _remember(table: OrderedDict[str, V], key: str, value: V) -> None:
    """Insert as most recent, dropping the oldest entry past the bound."""
    table[key] = value
    table.move_to_end(key)
    if len(table) > _MAX_TRACKED:
        table.popitem(last=False)
