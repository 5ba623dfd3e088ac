"""Two calls alternating A,B,A,B with identical results: nudge once, then block the pattern. Alternating
with changing results is progress for a while (a poll and a look at the log): past the polling ceiling's
count of cycles it gets one nudge, an ambiguous one a second opinion may withhold."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from .. import messages
from ..config import Config, Repetition
from ..events import Event, ToolCall, ToolResult
from ..opinion import ALTERNATION
from ..signature import OutputKey, output_key, same_output
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, BlockLedger, Counter, Observer, TypedGuard
from .repetition import result_matches


class AlternationGuard(TypedGuard):
    """Watches (call, result) pairs over a window of `alternation_window` calls."""

    name = "alternation"
    handles = (ToolCall, ToolResult)

    def __init__(self, cfg: Repetition, ledger: BlockLedger) -> None:
        self.window = cfg.alternation_window
        self.ceiling = cfg.progress_nudge_after  # cycles of A,B with changing results before the nudge
        self.ledger = ledger
        self.recent: deque[ToolCall] = deque(maxlen=2)  # the last two calls
        self.continued = 0  # calls in a row that repeat the call two before (an A,B pattern going on)
        self.changing_nudged = False
        self.pairs: deque[tuple[int | None, OutputKey, ToolCall]] = deque(maxlen=max(self.window, 1))
        self.pending: ToolCall | None = None
        self.nudged = False
        self.armed = False

    def configure(self, config: Config) -> None:
        self.window = config.repetition.alternation_window
        self.ceiling = config.repetition.progress_nudge_after
        self.pairs = deque(self.pairs, maxlen=max(self.window, 1))

    def hook(self, kind: type[Event]) -> Observer | None:
        if not self.window:
            return None  # the session asks again when its limits change
        return self._call if kind is ToolCall else self._result

    def _call(self, call: ToolCall, now: float) -> Sequence[Verdict]:
        self.pending = call
        recent = self.recent
        sig = call.sig
        if len(recent) == 2 and sig == recent[0].sig and sig != recent[1].sig:
            self.continued += 1
        else:
            self.continued = 0
            self.changing_nudged = False
        recent.append(call)
        # one cycle (no A,B going on: most calls) reaches only a ceiling of 1
        changing = self._changing(call) if self.continued or 0 < self.ceiling <= 1 else NO_VERDICTS
        if not self.armed:
            return changing
        expected = self.pairs[-2][0] if len(self.pairs) >= 2 else None
        if sig != expected:
            self.armed = False
            self.pairs.clear()
            return NO_VERDICTS
        if self.ledger.blocked_seq == call.seq:
            return NO_VERDICTS
        self.pending = None
        a, b = _label(self.pairs[-2][2]), _label(self.pairs[-1][2])
        evidence = {"tool": call.tool, "pattern": [a, b], "blocks": self.ledger.count}
        if self.ledger.exhausted():
            text = messages.repetition_terminate(call.tool, self.window, self.ledger.count)
            return (terminate(self.name, Termination.REPETITION_LOOP, text, **evidence),)
        self.ledger.add(call.seq)
        reason = f"{call.tool} continues an A,B loop ({a} / {b}) (block {self.ledger.count}/{self.ledger.max_blocks})"
        return (Verdict(Action.BLOCK, self.name, reason, message=messages.alternation_block(call.tool, a, b),
                        evidence=evidence),)

    def _result(self, result: ToolResult, now: float) -> Sequence[Verdict]:
        call = self.pending
        if call is None or not result_matches(result, call.call_id, call.tool):
            return NO_VERDICTS
        self.pending = None
        pairs = self.pairs
        sig = call.sig
        pairs.append((sig, output_key(result), call))  # digested only if its call recurs two later (and is long)
        if len(pairs) >= 3:
            before = pairs[-3]
            if sig != before[0] or not same_output(pairs[-1][1], before[1]):  # (this runs on every result)
                return NO_VERDICTS  # the newest pair breaks the pattern: no need to scan the window
        if not self._alternating():
            return NO_VERDICTS
        a, b = _label(pairs[0][2]), _label(pairs[1][2])
        if self.nudged:
            self.armed = True
            return NO_VERDICTS
        self.nudged = True
        self.pairs.clear()
        cycles = self.window // 2
        return (Verdict(Action.NUDGE, self.name, f"alternating {a} / {b} {cycles}x with identical results",
                        message=messages.alternation_nudge(a, b, cycles), evidence={"pattern": [a, b]}),)

    def _changing(self, call: ToolCall) -> Sequence[Verdict]:
        """A,B,A,B by the calls alone (counted in `continued`): past `ceiling` cycles, one nudge unless
        identical results had one."""
        recent = self.recent
        cycles = (self.continued + 2) // 2
        if not self.ceiling or cycles < self.ceiling or self.changing_nudged or self.nudged or self.armed:
            return NO_VERDICTS
        self.changing_nudged = True
        a, b = _label(recent[0]), _label(call)
        reason = f"alternating {a} / {b} {cycles}x; the results keep changing"
        return (Verdict(Action.NUDGE, self.name, reason, message=messages.alternation_changing_nudge(a, b, cycles),
                        evidence={"pattern": [a, b], "cycles": cycles, "changed": "output"}, ask=ALTERNATION),)

    def _alternating(self) -> bool:
        pairs = self.pairs
        if len(pairs) < self.window or self.window < 4:
            return False
        first, second = pairs[0], pairs[1]
        if first[0] == second[0]:
            return False
        return _alike(pairs, first, second)

    def _clear(self) -> None:
        self.pairs.clear()
        self.recent.clear()
        self.pending = None
        self.continued = 0
        self.nudged = self.armed = self.changing_nudged = False

    def human_turn(self) -> None:
        self._clear()

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "repetition", "alternation"):
            self._clear()

    def counters(self) -> list[Counter]:
        return [Counter("alternation", len(self.pairs) if self._alternating_prefix() else 0, self.window)]

    def _alternating_prefix(self) -> bool:
        pairs = self.pairs
        if len(pairs) < 2 or pairs[0][0] == pairs[1][0]:
            return False
        return _alike(pairs, pairs[0], pairs[1])


def _alike(pairs: deque[tuple[int | None, OutputKey, ToolCall]], first: tuple[int | None, OutputKey, ToolCall],
           second: tuple[int | None, OutputKey, ToolCall]) -> bool:
    """Every pair has the call and result of `first` (at even places) or `second` (at odd ones)."""
    for i, (sig, key, _call) in enumerate(pairs):
        like = second if i % 2 else first
        if sig != like[0] or not same_output(key, like[1]):
            return False
    return True


def _label(call: ToolCall) -> str:
    """A call as the messages show it: tool and arguments."""
    return f"{call.tool} {messages.show_args(call.args)}"
