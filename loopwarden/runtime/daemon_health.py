"""What the daemon could not write, keep or send since it started: `status`, and every console when it changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .daemon_log import DaemonLog
from .records import Recorder
from .spill_bounds import SpillLedger


class AlertHealth(Protocol):
    def health(self) -> dict[str, Any] | None: ...


class DaemonHealth:
    """The daemon's trouble counters, all zero on a good day; `hook_refusals` is counted by the hook operations."""

    def __init__(self, recorder: Recorder, log: DaemonLog, spill_ledger: SpillLedger, alerts: AlertHealth) -> None:
        self.recorder = recorder
        self.log = log
        self.spill_ledger = spill_ledger
        self.alerts = alerts
        self.hook_refusals = 0  # new hook sessions refused by the bounds (hook_intake.py)
        self.spending: Callable[[], dict[str, Any]] | None = None  # the day's spend and budgets (spending.py)

    def __call__(self) -> dict[str, Any]:
        health = {"store": self.recorder.health.to_dict(), "dropped_events": sum(self.recorder.dropped.values()),
                  "log_errors": self.log.errors, "hook_sessions_refused": self.hook_refusals,
                  "spill": self.spill_ledger.health()}
        alerts = self.alerts.health()
        if alerts is not None:
            health["alerts"] = alerts
        if self.spending is not None:
            health["spending"] = self.spending()
        return health
