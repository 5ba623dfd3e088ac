"""The keeper's watch over its daemon: when none is attached, start one again (as the last one's hello said), a
bounded number of times, each given a while to say hello; only then is it time to stop the agents."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Final

RESTARTS: Final = 3  # daemons started again after the daemon died, before the agents are stopped
DAEMON_WAIT: Final = 20.0  # seconds a started daemon has to say hello
HANDOVER_WAIT: Final = 60.0  # seconds the next daemon has after a planned `bye`


class Revival:
    """Whether a daemon is attached, since when none is, and what to do about it."""

    def __init__(self, *, restarts: int = RESTARTS, daemon_wait: float = DAEMON_WAIT,
                 handover_wait: float = HANDOVER_WAIT) -> None:
        self.restarts, self.daemon_wait, self.handover_wait = restarts, daemon_wait, handover_wait
        self.command: dict[str, Any] | None = None  # how to start a daemon again (its hello); None: never
        self.waiting_since: float | None = time.monotonic()  # no daemon attached since
        self.wait_for = daemon_wait  # ... for this long before starting one (or giving up)
        self.started: list[int] = []  # the daemons it started (its children, not agents)
        self.attempts = 0
        self.given_up = False

    def attached(self) -> None:
        self.waiting_since = None

    def hello(self, command: Any) -> None:
        if isinstance(command, dict) and isinstance(command.get("argv"), list):
            self.command = command
        self.attempts, self.given_up = 0, False

    def left(self, *, planned: bool) -> None:
        """The daemon went: on purpose (`bye`: its successor gets HANDOVER_WAIT), or it died (started again at
        once, or when it cannot be, the agents get DAEMON_WAIT before they are stopped)."""
        now = time.monotonic()
        if planned:
            self.waiting_since, self.wait_for = now, self.handover_wait
        elif self.waiting_since is None:
            self.waiting_since, self.wait_for = now, 0.0 if self._can_restart else self.daemon_wait

    def never_again(self) -> None:
        """stop-daemon: no daemon is started again."""
        self.command = None
        self.given_up = True

    def due(self, now: float) -> bool:
        """Called while no daemon is attached: True when it is time to stop the agents."""
        if self.given_up:
            return True
        assert self.waiting_since is not None
        if now - self.waiting_since < self.wait_for:
            return False
        if self._can_restart:
            self.attempts += 1
            self._start()
            self.waiting_since, self.wait_for = now, self.daemon_wait
            return False
        self.given_up = True
        return True

    @property
    def _can_restart(self) -> bool:
        return self.command is not None and self.attempts < self.restarts

    def _start(self) -> None:
        """Start the daemon again, as its hello said, logging where it logs."""
        assert self.command is not None
        command = self.command
        log: int = subprocess.DEVNULL
        try:
            if isinstance(command.get("log"), str):
                log = os.open(command["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            proc = subprocess.Popen(command["argv"], env=command.get("env"), cwd=command.get("cwd") or "/",
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                    close_fds=True)
        except (OSError, ValueError, TypeError):
            return
        finally:
            if log != subprocess.DEVNULL:
                os.close(log)
        self.started.append(proc.pid)
