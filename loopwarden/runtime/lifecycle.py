"""The daemon's stop, and the task group that work outliving a request runs in."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .requests import RequestError

SHUTDOWN_CAP = 10.0  # seconds from a stop request to the daemon's exit, whatever limits.kill_grace says
SHUTDOWN_KILL_AT = 7.0  # ... SIGTERM's grace ends here at the latest: sessions SIGKILL what is left
SHUTDOWN_FORCE_AT = 8.5  # ... the daemon SIGKILLs what sessions have not ended by now (a stuck session)
ALERT_DRAIN = 2.0  # ... queued alerts get at most this long to go out, after the sessions ended
SHUTDOWN_CLOSE = 1.0  # ... and keeps this long for the last records, the store and the cgroups


class Shutdown:
    """The daemon's stop: once it has begun no session starts, and the daemon must be gone within SHUTDOWN_CAP."""

    def __init__(self) -> None:
        self.begun = False
        self.handover = False  # restart-daemon: kept agents are left to the keeper for the next daemon
        self.deadline = 0.0  # monotonic: when the daemon must be gone (SHUTDOWN_CAP after the request)
        self.requested = anyio.Event()  # set: the daemon stops its sessions and exits

    def begin(self) -> None:
        """From now on no session starts, and the daemon must be gone within SHUTDOWN_CAP."""
        if not self.begun:
            self.begun = True
            self.deadline = time.monotonic() + SHUTDOWN_CAP

    def request(self) -> None:
        """Stop now (a signal)."""
        self.begin()
        self.requested.set()

    async def soon(self) -> None:
        """Stop once the reply to stop-daemon has had time to reach its client."""
        await anyio.sleep(0.05)
        self.requested.set()

    def refuse_starts(self, op: str) -> None:
        """Refuse an operation that would start a session, once the stop has begun."""
        if self.begun:
            raise RequestError(f"the daemon is shutting down and starts no more sessions; {op} again once it "
                               "has stopped (a new one starts then)", kind="daemon")


class Tasks:
    """The daemon's task group (set while it serves): a kill, a stop or a session's run outlives its request."""

    def __init__(self) -> None:
        self.group: TaskGroup | None = None

    @property
    def running(self) -> bool:
        return self.group is not None

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        if self.group is None:
            raise RuntimeError("the daemon is not serving")
        self.group.start_soon(func, *args)
