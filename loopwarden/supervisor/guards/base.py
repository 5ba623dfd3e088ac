"""What every guard is: a pure object that turns events into verdicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final, NamedTuple

from ..config import Config
from ..events import Event
from ..verdicts import Verdict

NO_VERDICTS: Final[tuple[Verdict, ...]] = ()
Observer = Callable[[Any, float], Sequence[Verdict]]  # takes the event type it is the hook of


class Counter(NamedTuple):
    """One counter against its limit, for the health panel (limit 0 = off). A named tuple: a snapshot builds
    twenty of them, and a frozen dataclass costs twice as much to make."""

    name: str
    value: float
    limit: float


class Guard:
    """Base class: `observe` is called only for event types in `handles`; `now` is injected."""

    name: ClassVar[str] = "guard"
    handles: ClassVar[tuple[type[Event], ...]] = ()

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        return NO_VERDICTS

    def hook(self, kind: type[Event]) -> Observer | None:
        """What judges events of `kind` (a concrete type in `handles`): the session calls it for each such
        event; None when the type needs nothing from this guard."""
        return self.observe

    def tick(self, now: float) -> Sequence[Verdict]:
        """Time-based checks between events."""
        return NO_VERDICTS

    def human_turn(self) -> None:
        """A user_message arrived (only called when reset_on_user_message is on)."""

    def human_reset(self, counter: str | None = None) -> None:
        """An operator decided or reset counters; `counter` limits it to one counter."""

    def counters(self) -> list[Counter]:
        return []

    def configure(self, config: Config) -> None:
        """A running session's limits changed (`loopwarden set`): read the new ones from now on."""


class TypedGuard(Guard):
    """A guard with one method per event type, named by `hook`: the session calls that method directly, so
    the hot path has no call to `observe` and no test of the event's type; `observe` serves the rest (a tool's
    own thresholds, exemptions)."""

    def hook(self, kind: type[Event]) -> Observer | None:
        raise NotImplementedError

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        judge = self.hook(type(event))
        return NO_VERDICTS if judge is None else judge(event, now)


class BlockLedger:
    """Blocked repeats shared by the repetition rules; past the limit a repeat terminates."""

    def __init__(self, max_blocks: int) -> None:
        self.max_blocks = max_blocks
        self.count = 0
        self.blocked_seq = -1  # the call already blocked by one rule is not blocked twice

    def exhausted(self) -> bool:
        """True when the next block must be a termination instead."""
        return self.count >= self.max_blocks

    def add(self, seq: int) -> int:
        self.count += 1
        self.blocked_seq = seq
        return self.count

    def reset(self) -> None:
        self.count = 0
