"""The operations on the daemon itself: `ping` (its state), `prune` (its history), `shutdown` (stop-daemon) and
`handover` (restart-daemon)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from typing import Any

import anyio

from ..paths import Paths
from ..supervisor.config import format_duration
from . import oom
from .audit import AuditLog, warned
from .broadcast import Broadcaster
from .daemon_health import DaemonHealth
from .keeping import Keeping
from .lifecycle import SHUTDOWN_CAP, Shutdown, Tasks
from .ops_read import no_store
from .principal import Principal
from .processes import ProcessWatch
from .registry import SessionRegistry
from .requests import RequestError, request_note
from .upkeep import Upkeep, seconds_before

PROTOCOL = 1


class DaemonOperations:
    """`op_ping`, `op_prune`, `op_shutdown`."""

    def __init__(self, paths: Paths, registry: SessionRegistry, health: DaemonHealth, broadcaster: Broadcaster,
                 watch: ProcessWatch, upkeep: Upkeep, audit: AuditLog, shutdown: Shutdown, tasks: Tasks,
                 keeping: Keeping, *, clock: Callable[[], float]) -> None:
        self.paths = paths
        self.registry = registry
        self.health = health
        self.broadcaster = broadcaster
        self.watch = watch
        self.upkeep = upkeep
        self.audit = audit
        self.shutdown = shutdown
        self.tasks = tasks
        self.keeping = keeping
        self.clock = clock
        self.started_at = clock()

    async def op_ping(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        """The daemon's own state, with what could not be written or delivered since it started."""
        sessions = self.registry.sessions
        guardian = self.watch.guardian
        return {"protocol": PROTOCOL, "pid": os.getpid(), "sessions": len(sessions),
                "live": sum(1 for s in sessions.values() if not s.final),
                "uptime": round(self.clock() - self.started_at, 1), "socket": str(self.paths.socket),
                "database": str(self.paths.database), **self.health(),
                "subscribers": len(self.broadcaster.subscribers),
                "queued_for_subscribers": self.broadcaster.budget.used, "stopping": self.shutdown.begun,
                "guardian": {"pid": guardian.pid, "restarts": guardian.restarts}, "keeper": self.keeping.describe(),
                "containment": self.watch.kind,
                "oom_score_adj": {"daemon": oom.own_score(), "agents": self.watch.agent_oom},
                "gc": {"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}}

    async def op_prune(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Delete the history of sessions that ended more than `older_than` seconds ago (and, with
        `audit_older_than`, audit rows that old); `dry_run` only counts."""
        older = req.get("older_than")
        if not isinstance(older, (int, float)) or isinstance(older, bool) or older < 0:
            raise RequestError("prune needs 'older_than', a number of seconds >= 0")
        audit = req.get("audit_older_than")
        if audit is not None and (not isinstance(audit, (int, float)) or isinstance(audit, bool) or audit < 0):
            raise RequestError("'audit_older_than' must be a number of seconds >= 0")
        store = self.registry.store
        if store is None:
            raise no_store("nothing can be pruned now")
        now = self.clock()
        if req.get("dry_run"):
            counts = await anyio.to_thread.run_sync(lambda: store.prunable(now - older, seconds_before(now, audit)))
            return {"dry_run": True, "deleted": counts}
        await self.audit.before(who, None, "prune", f"ended before {format_duration(older)} ago", request_note(req),
                                "pruning")
        return {"dry_run": False, "deleted": await self.upkeep.prune(now - older, seconds_before(now, audit))}

    async def op_shutdown(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Stop every session and exit, within SHUTDOWN_CAP; `run` and `adopt` are refused from now on.
        With `unless_live`, only when no session is live: else nothing happens and the reply names them
        (`{stopping: false, live: [{id, name}]}`), for the client to ask its user first."""
        sessions = self.registry.sessions
        live = [{"id": sid, "name": s.spec.name} for sid, s in sessions.items() if not s.final]
        if req.get("unless_live") and live:
            return {"stopping": False, "live": live}
        self.shutdown.begin()
        warning = await self.audit.before(who, None, "stop-daemon", None, request_note(req), "stopping", stops=True)
        self.tasks.start_soon(self.shutdown.soon)
        return warned({"stopping": True, "sessions": len([s for s in sessions.values() if not s.final]),
                       "pid": os.getpid(), "within": SHUTDOWN_CAP}, warning)

    async def op_handover(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """restart-daemon: exit, leaving the kept agents to the keeper for the next daemon (which the client starts);
        the sessions that are not kept stop, as with stop-daemon. With `unless_stopping`, nothing happens when some
        would stop: the reply names them, for the client to ask its user first."""
        sessions = self.registry.sessions
        live = [{"id": sid, "name": s.spec.name} for sid, s in sessions.items() if not s.final]
        handed_over = self.keeping.handed_over
        kept = [s for s in live if s["id"] in handed_over]
        stopping = [s for s in live if s["id"] not in handed_over]
        if req.get("unless_stopping") and stopping:
            return {"stopping": False, "live": stopping}
        self.shutdown.handover = True
        self.shutdown.begin()
        warning = await self.audit.before(who, None, "restart-daemon", f"{len(kept)} kept, {len(stopping)} stopped",
                                          request_note(req), "handing over", stops=bool(stopping))
        self.tasks.start_soon(self.shutdown.soon)
        return warned({"stopping": True, "kept": len(kept), "sessions": len(stopping), "pid": os.getpid(),
                       "within": SHUTDOWN_CAP}, warning)
