"""What the daemon's parts share: its state, and the methods one part calls in another.

The daemon (`daemon.py`) is one object made of parts, one module per job: the socket server
(`server.py`), the session registry (`registry.py`), record routing (`routing.py`), the control
operations (`operations.py`), the agents' processes (`processes.py`), disk upkeep (`upkeep.py`) and
alerts (`alerting.py`).
Each part is a class over this state; `Daemon` puts them together and owns the lifecycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import psutil

from .cgroups import CgroupTree
from .containment import Containment
from .contract import Supervised
from .guardian_link import GuardianLink
from .history import EndedSessions
from .restarts import Restartables
from .hook_agents import HookClaims
from .hooked import HookedSession
from ..paths import Paths
from .principal import Principal
from ..supervisor.events import Event
from .records import Recorder
from .spill_bounds import SpillLedger
from .store import EventRow, Store
from .subscribers import QueueBudget, Subscriber

PROTOCOL = 1
SHUTDOWN_CAP = 10.0  # seconds from a stop request to the daemon's exit, whatever limits.kill_grace says
SHUTDOWN_KILL_AT = 7.0  # ... SIGTERM's grace ends here at the latest: sessions SIGKILL what is left
SHUTDOWN_FORCE_AT = 8.5  # ... the daemon SIGKILLs what sessions have not ended by now (a stuck session)
ALERT_DRAIN = 2.0  # ... queued alerts get at most this long to go out, after the sessions ended
SHUTDOWN_CLOSE = 1.0  # ... and keeps this long for the last records, the store and the cgroups


class RequestError(Exception):
    """A request the daemon refuses; the message is sent back as one line. `kind` says whose trouble it
    is, for the client's exit code: "request" (what was asked is wrong), "daemon" (the daemon cannot do it
    now: its store, its audit log, a shutdown), "refused" (the asker may not)."""

    def __init__(self, message: str, *, kind: str = "request") -> None:
        super().__init__(message)
        self.kind = kind


class AlreadyAudited(RequestError):
    """A refusal the operation recorded in the audit log itself (or could not record): not logged twice."""


class DaemonParts:
    """The state every part reads (set in `Daemon.__init__`), and the cross-part methods, typed once."""

    paths: Paths
    clock: Callable[[], float]
    sessions: dict[str, Supervised]  # live, and ended until stored
    hooked: dict[str, HookedSession]  # the agent's own session id -> its attached session
    attached: dict[str, HookedSession]  # session id -> the attached session, while it is in `sessions`
    recent: EndedSessions  # the newest ended sessions' snapshots; the store has them all
    restartable: Restartables  # the newest ended launched sessions' specs and failures, for `restart`
    recorder: Recorder
    subscribers: list[Subscriber]
    heartbeat: float  # seconds between keep-alive records on a quiet subscription
    _subscribed: anyio.Event  # set when a subscriber comes: wakes the heartbeat timer
    queue_budget: QueueBudget
    dirty: set[str]
    releasing: dict[str, int]  # ended session -> the mark of its final snapshot in its lane
    guardian: GuardianLink
    cgroups: CgroupTree | None
    containment: str  # how sessions' processes are found: "cgroup" or "tracking"
    agent_oom: int | None  # the oom_score_adj agents start with (oom.py); None: the daemon's
    instance: str  # "PID.START" of this daemon, the end of every agent's LOOPWARDEN_SESSION
    shutting_down: bool
    next_id: int
    started_at: float
    log_errors: int
    connections: int
    hook_refusals: int  # new hook sessions refused by the bounds (hook_intake.py)
    hook_claims: HookClaims  # the agent processes hooks claimed (hook_agents.py)
    subreaper: bool
    unserialisable: int  # records subscribers got as a clipped copy because orjson could not write them
    spill_ledger: SpillLedger  # the spill files' bytes, all sessions together
    _stop_deadline: float  # monotonic: when the daemon must be gone (SHUTDOWN_CAP after the request)
    _cleaner_wake: anyio.Event
    _stop: anyio.Event
    _orphans: anyio.Event
    _sampler_wake: anyio.Event
    _last_publish: float
    _last_health: dict[str, Any]
    _large_replies: anyio.CapacityLimiter
    _tg: Any
    _proc_cache: dict[str, dict[int, psutil.Process]]  # per session, so cpu_percent has a base

    @property
    def store(self) -> Store | None:
        raise NotImplementedError

    # ---- implemented by the parts named; declared here so each part can call the others ----
    async def _resolve(self, ref: Any) -> str:
        raise NotImplementedError  # registry.py

    async def _live(self, ref: Any) -> Supervised:
        raise NotImplementedError  # registry.py

    def _unique_name(self, name: str) -> tuple[str, bool]:
        raise NotImplementedError  # registry.py

    async def _refused(self, who: Principal, op: str, req: dict[str, Any], reason: str) -> None:
        raise NotImplementedError  # operations.py

    def _live_snapshot(self, session: Supervised) -> dict[str, Any]:
        raise NotImplementedError  # registry.py

    def _snapshot(self, sid: str) -> dict[str, Any]:
        raise NotImplementedError  # registry.py

    def _all_sessions(self, wanted: set[str] | None = None) -> list[str]:
        raise NotImplementedError  # registry.py

    def _new_id(self) -> str:
        raise NotImplementedError  # registry.py

    async def _run_session(self, session: Supervised) -> None:
        raise NotImplementedError  # registry.py

    def _release_ended(self) -> None:
        raise NotImplementedError  # registry.py

    def _log(self, text: str) -> None:
        raise NotImplementedError  # routing.py

    def helpers(self) -> set[int]:
        raise NotImplementedError  # server.py

    async def _stop_ended_agent(self, sid: str) -> None:
        raise NotImplementedError  # hook_ops.py

    def _broadcast(self, kind: str, session_id: str, data: dict[str, Any], *, is_event: bool) -> None:
        raise NotImplementedError  # routing.py

    def sink(self, kind: str, session_id: str, data: dict[str, Any], size: int = 0) -> None:
        raise NotImplementedError  # routing.py

    def sink_rows(self, session_id: str, rows: list[EventRow], events: list[Event], size: int) -> None:
        raise NotImplementedError  # routing.py

    def _mark(self, session_id: str) -> None:
        raise NotImplementedError  # routing.py

    def _health(self) -> dict[str, Any]:
        raise NotImplementedError  # routing.py

    async def _flush(self) -> None:
        raise NotImplementedError  # routing.py

    async def _durably(self, mark: int) -> bool:
        raise NotImplementedError  # routing.py

    def _audit(self, who: Principal, session_id: str | None, action: str, target: str | None,
               note: str | None, outcome: str) -> int:
        raise NotImplementedError  # routing.py

    def _alert_record(self, kind: str, session_id: str, data: dict[str, Any]) -> None:
        raise NotImplementedError  # alerting.py

    def _alert_ended(self, snap: dict[str, Any]) -> None:
        raise NotImplementedError  # alerting.py

    def _alert_health(self) -> dict[str, Any] | None:
        raise NotImplementedError  # alerting.py

    def _containment(self, sid: str) -> Containment:
        raise NotImplementedError  # processes.py

    def _guard_group(self, pgid: int, alive: bool) -> None:
        raise NotImplementedError  # processes.py

    async def _prune(self, ended_before: float, audit_before: float | None) -> dict[str, int]:
        raise NotImplementedError  # upkeep.py

    async def _target_session(self, req: dict[str, Any]) -> str | None:
        raise NotImplementedError  # operations.py

    def _begin_shutdown(self) -> None:
        raise NotImplementedError  # daemon.py

    async def _stop_soon(self) -> None:
        raise NotImplementedError  # daemon.py
