"""Each event of a live session judged by the engine, and recorded with its verdicts."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Final

from ...supervisor import kinds
from ...supervisor.events import Event
from ...supervisor.health import SessionHealth
from ...supervisor.verdicts import Action, Verdict
from ..opinion import SecondOpinion
from .agent import Agent
from .journal import Journal
from .recovery import Recovery
from .spills import Spills

ERRORS_KEPT: Final = 3  # the agent's last errors, for a restart's summary
RATE_SECONDS: Final = 60  # events per second are kept this long, for the console's sparkline


class Judge:
    """Hands each event to the engine and records it: a typed line's row encoded from its record (the common
    case), else the event's record and its verdicts. A spill verdict is carried out before the event is recorded
    (the record keeps the notice, not the output); a loop's end may give way to a rewind (recovery.on_loop)."""

    def __init__(self, health: SessionHealth, journal: Journal, agent: Agent, spills: Spills, recovery: Recovery,
                 opinion: SecondOpinion | None, clock: Callable[[], float]) -> None:
        self.health = health
        self.journal = journal
        self.agent = agent
        self.spills = spills
        self.recovery = recovery
        self.opinion = opinion
        self.clock = clock
        self.tool_calls = 0
        self.errors: deque[str] = deque(maxlen=ERRORS_KEPT)
        self.rate: deque[int] = deque([0] * RATE_SECONDS, maxlen=RATE_SECONDS)  # events per second, last minute
        self._rate_second = 0

    def judge(self, event: Event, size: int = 0, typed: Any = None) -> list[Verdict]:
        """The engine's verdicts on `event` (read from `size` bytes), the event and the verdicts recorded.
        `typed`: the typed record the event was read from (TypedLines); the event's row is then encoded from it
        when nothing changed the event."""
        now = self.clock()
        if int(now) == self._rate_second:
            self.rate[-1] += 1
        else:
            self.count_rate(now)
        verdicts = self.health.observe(event, now)
        kind = type(event)
        if kind is kinds.TOOL_CALL:
            self.tool_calls += 1
        elif kind is kinds.TOOL_RESULT:
            for verdict in verdicts:
                if verdict.action == Action.SPILL:
                    self.spills.spill(verdict, event, self.health.config, now)  # type: ignore[arg-type]
        elif kind is kinds.ERROR:
            self.errors.append(event.message)  # type: ignore[attr-defined]
        elif kind is kinds.USAGE and event.cost_usd:  # type: ignore[attr-defined]
            self.journal.sink("spend", {"usd": event.cost_usd, "ts": now})  # type: ignore[attr-defined]
        if verdicts:
            if verdicts[-1].action == Action.TERMINATE:
                verdicts = self.recovery.recover(verdicts)
            self.journal.noteworthy = True  # published at once (Journal.progress), not with the next second's counts
        elif kind is kinds.HELLO:
            self.journal.noteworthy = True
        elif typed is not None and self.opinion is None:  # (a verdict may change the event)
            stored = self.agent.typed_stored
            assert stored is not None  # a typed record comes only from typed lines
            data = stored(typed, event)
            if data is not None:  # stored with the chunk's other rows
                self.journal.row(event, now, data, size)
                return verdicts
        record = event.to_dict()
        record["seq"] = event.seq
        self.journal.sink("event", record, size, now)
        if self.opinion is not None:
            self.opinion.recent.add(record)
        if verdicts:
            self.journal.record(verdicts, now)
            self.recovery.log_withdrawn()
        return verdicts

    def count_rate(self, now: float, add: int = 1) -> None:
        second = int(now)
        if second != self._rate_second:
            for _ in range(min(max(second - self._rate_second, 0), RATE_SECONDS)):
                self.rate.append(0)
            self._rate_second = second
        self.rate[-1] += add

    def rate_view(self, now: float) -> list[int]:
        """Events per second over the last half minute."""
        self.count_rate(now, 0)
        return list(self.rate)[-30:]
