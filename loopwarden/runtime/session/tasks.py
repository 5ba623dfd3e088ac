"""What the parts of a live session share to run tasks: the session's task group and the ticker's wake-up."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
from anyio.abc import TaskGroup


class Wake:
    """The ticker's wake-up: set by anything that may have moved a deadline or left the ticker work."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self, seconds: float) -> None:
        """Until set, or `seconds` at most."""
        with anyio.move_on_after(seconds):
            await self._event.wait()

    def clear(self) -> None:
        if self._event.is_set():
            self._event = anyio.Event()


class Tasks:
    """The session's task group while it supervises the agent. Tasks besides the pumps, the stdin writer and the
    ticker (a second opinion, a stop) are counted: while one runs, the end of the session cancels them all."""

    def __init__(self) -> None:
        self.group: TaskGroup | None = None  # None before and after supervision: nothing may be started then
        self.others = 0
        self.finishing = False  # the agent and its output are gone: the stdin writer and the ticker return

    def start(self, job: Callable[[], Coroutine[Any, Any, None]], name: str) -> bool:
        """Start `job` in the group; False when there is none, or the session is finishing."""
        if self.group is None or self.finishing:
            return False
        self.group.start_soon(job, name=name)
        return True

    def start_other(self, job: Callable[..., Awaitable[None]], *args: Any, name: str) -> None:
        """Start a counted task (the group must be open)."""
        assert self.group is not None
        self.group.start_soon(self._other, job, *args, name=name)

    async def _other(self, job: Callable[..., Awaitable[None]], *args: Any) -> None:
        self.others += 1
        try:
            await job(*args)
        finally:
            self.others -= 1
