"""The daemon's event loop: asyncio's, with its wake-ups moderated.

Two hundred agents writing one event at a time wake an asyncio loop once per event, and each
wake-up (the epoll_wait that sleeps and returns, the loop's round, the read) cost more than
judging and storing the event. As a network card moderates its interrupts, the loop, when it
would sleep again less than WAKE_GAP after its last wake-up, first lets that much time pass:
what arrives meanwhile is taken in one round. A quiet loop (the last wake-up longer ago) waits
as before, so an event that comes alone is seen at once; under load an event waits at most
WAKE_GAP more, well within the live latency target (bench/live_latency.py: p99 < 5 ms).
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable
from typing import Any

WAKE_GAP = 0.001  # seconds: the least time between two wake-ups of a busy loop


class ModeratedSelector(selectors.DefaultSelector):  # epoll on Linux
    """A selector whose select() returns at most once per WAKE_GAP while it is woken often."""

    def __init__(self, gap: float = WAKE_GAP, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__()
        self.gap = gap
        self.clock, self.sleep = clock, sleep
        self._woke = float("-inf")  # when the last select() returned
        self._writers: set[Any] = set()  # what waits to write (a reply or a subscriber's feed going out)

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = super().register(fileobj, events, data)
        self._note(key)
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = super().modify(fileobj, events, data)
        self._note(key)
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        key = super().unregister(fileobj)
        self._writers.discard(key.fd)
        return key

    def _note(self, key: selectors.SelectorKey) -> None:
        if key.events & selectors.EVENT_WRITE:
            self._writers.add(key.fd)
        else:
            self._writers.discard(key.fd)

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        # not while something waits to write: a large reply goes out in many writes, each after a wake-up,
        # and holding each would add a gap per write (a `list` of 200 sessions: +1.7 ms)
        if (timeout is None or timeout > 0) and not self._writers:  # nothing ready, and it would wait
            wait = self._woke + self.gap - self.clock()
            if wait > 0 and (timeout is None or timeout > wait):  # not for a timer due sooner
                self.sleep(wait)
                timeout = None if timeout is None else timeout - wait
        ready: list[tuple[Any, int]] = super().select(timeout)
        self._woke = self.clock()
        return ready


def moderated_loop() -> asyncio.AbstractEventLoop:
    """A new asyncio loop over a ModeratedSelector (anyio.run's `loop_factory`)."""
    return asyncio.SelectorEventLoop(ModeratedSelector())
