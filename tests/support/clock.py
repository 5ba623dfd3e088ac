"""A clock a test moves by hand, for code that takes its clock as an argument."""

from __future__ import annotations


class Clock:
    """Calling it gives the time, `now`, which only the test moves; `sleep` records the wait and moves it on."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
