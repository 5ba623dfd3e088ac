"""Waiting for a condition: poll it until it holds, and fail with what was awaited once a deadline passes.

Tests wait on conditions, never on fixed sleeps: a loaded machine only makes them slower, never wrong.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

Described = str | Callable[[], str]  # what is awaited; a function is asked only on a timeout (the state then)


class Poll:
    """A condition polled against a deadline: each call returns its value, falsy while it does not hold,
    and fails with what was awaited once `timeout` seconds have passed."""

    def __init__(self, condition: Callable[[], Any], timeout: float, what: Described) -> None:
        self.condition, self.timeout, self.what = condition, timeout, what
        self.deadline = time.monotonic() + timeout

    def __call__(self) -> Any:
        value = self.condition()
        if not value and time.monotonic() > self.deadline:
            what = self.what() if callable(self.what) else self.what
            raise AssertionError(f"timed out after {self.timeout}s waiting for {what}")
        return value


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, what: Described = "condition",
             every: float = 0.02) -> Any:
    """Poll until `condition()` is truthy (and return it) or fail after `timeout` seconds.

    `every` is the pause between polls: the condition often asks the daemon, and finer polls would cost it CPU."""
    poll = Poll(condition, timeout, what)
    while not (value := poll()):
        time.sleep(every)
    return value


async def until(condition: Callable[[], Any], timeout: float = 20.0,  # noqa: ASYNC109 - a poll's deadline
                what: Described = "condition", every: float = 0.01,
                pause: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> Any:
    """`wait_for` inside an event loop, which runs between polls (`pause(every)`) so that what the condition
    waits for can happen."""
    poll = Poll(condition, timeout, what)
    while not (value := poll()):
        await pause(every)
    return value
