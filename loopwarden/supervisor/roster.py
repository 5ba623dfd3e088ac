"""GuardRoster: the guards of one session, built from its config, and which of them sees each event type."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from .config import Config
from .control import TUNED_GUARDS
from .events import EVENT_TYPES, Event, InvalidLine, Output, ResourceSample, ToolCall, ToolResult
from .guards.alternation import AlternationGuard
from .guards.attempts import AttemptsGuard
from .guards.base import BlockLedger, Counter, Guard
from .guards.budget import BudgetGuard
from .guards.chanting import ChantingGuard
from .guards.condensation import CondensationGuard
from .guards.failures import FailuresGuard
from .guards.iterations import IterationsGuard
from .guards.loop_counter import LoopCounterGuard, Similarity
from .guards.monologue import MonologueGuard
from .guards.reflections import ReflectionsGuard
from .guards.repetition import RepetitionGuard
from .guards.rereads import RereadsGuard
from .guards.requests import GateRequestGuard, LargeOutputGuard
from .guards.runtime import RuntimeGuard
from .guards.same_error import SameErrorGuard
from .guards.validation import ValidationGuard
from .verdicts import Verdict

# guards whose bookkeeping other rules and views need (activity, validation counts): switching their rules
# off drops their verdicts, never their observing
_ALWAYS_OBSERVE: Final = frozenset({"runtime", "validation"})
# Calls and results are most events: SessionHealth does validation's and runtime's bookkeeping of them itself
# (what their hooks `_call`, `_step` and `_result` do; neither gives a verdict for them), one call per guard
# fewer. A call judged by a tool's own thresholds or with exemptions still goes through the guards themselves.
_FUSED: Final = (ToolCall, ToolResult)

Observer = Callable[[Event, float], Sequence[Verdict]]


class GuardRoster:
    """Every guard of a session, in the order they judge, and its routing: `dispatch` (the guards of each event
    type) and `observers` (their bound hooks, what the common path of `SessionHealth.observe` calls)."""

    def __init__(self, config: Config, ledger: BlockLedger, runtime: RuntimeGuard, validation: ValidationGuard,
                 budget: BudgetGuard, by_type: dict[str, int], similarity: Similarity) -> None:
        self.ledger = ledger
        self.runtime = runtime
        self.validation = validation
        self.guards: list[Guard] = [
            validation,
            runtime,
            RepetitionGuard(config.repetition, ledger),
            SameErrorGuard(config.repetition, ledger),
            AlternationGuard(config.repetition, ledger),
            MonologueGuard(config.repetition),
            RereadsGuard(config, ledger),
            ChantingGuard(config),
            CondensationGuard(config, by_type),
            ReflectionsGuard(config),
            FailuresGuard(config.failures),
            LoopCounterGuard(config.loop, similarity),
            AttemptsGuard(config.attempts),
            IterationsGuard(config.limits, config.escalation),
            budget,
            LargeOutputGuard(config.spill),
            GateRequestGuard(),
        ]
        self.dispatch: dict[type[Event], tuple[Guard, ...]] = {}
        self.observers: dict[type[Event], tuple[Observer, ...]] = {}

    def route(self, off: frozenset[str]) -> None:
        """Which guards see each event type: every guard but those whose rule is in `off`."""
        on = [g for g in self.guards if g.name not in off or g.name in _ALWAYS_OBSERVE]
        self.dispatch = {kind: tuple(g for g in on if issubclass(kind, g.handles))
                         for kind in (*EVENT_TYPES.values(), InvalidLine, Output, ResourceSample)}
        fused = (self.validation, self.runtime)
        self.observers = {kind: tuple(judge for g in guards if (judge := g.hook(kind)) is not None
                                      and not (kind in _FUSED and g in fused))
                          for kind, guards in self.dispatch.items()}

    def observe_some(self, event: Event, kind: type[Event], exempt: frozenset[str], tuned: Config | None,
                     config: Config, now: float) -> list[Verdict] | None:
        """The guards of the type but those the tool is exempt from, those of TUNED_GUARDS by the tool's own
        thresholds (then back to the session's `config`)."""
        found: list[Verdict] | None = None
        for guard in self.dispatch[kind]:
            if exempt and guard.name in exempt:
                continue
            if tuned is not None and guard.name in TUNED_GUARDS:
                guard.configure(tuned)
                try:
                    verdicts = guard.observe(event, now)
                finally:
                    guard.configure(config)
            else:
                verdicts = guard.observe(event, now)
            if verdicts:
                found = [*found, *verdicts] if found else list(verdicts)
        return found

    def counters(self, now: float | None) -> list[Counter]:
        """Every counter against its limit; the clock's counters as of `now` when given."""
        out = [Counter("blocks", self.ledger.count, self.ledger.max_blocks)]
        for guard in self.guards:
            out.extend(self.runtime.counters(now) if guard is self.runtime else guard.counters())
        return out

    def configure(self, config: Config) -> None:
        """Every guard judges by `config` from now on."""
        self.ledger.max_blocks = config.repetition.max_blocks
        for guard in self.guards:
            guard.configure(config)

    def human_turn(self) -> None:
        """A person spoke (a user message): the repetition ledger and every guard's turn start afresh."""
        self.ledger.reset()
        for guard in self.guards:
            guard.human_turn()

    def reset(self, counter: str | None = None) -> None:
        """A human intervention: reset every counter, or the one named."""
        if counter in (None, "repetition", "blocks"):
            self.ledger.reset()
        for guard in self.guards:
            guard.human_reset(counter)
