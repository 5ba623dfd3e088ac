"""The audit log: every operator action (done, refused or failed) and every alert, one row each, queued in a
lane of its own; an action is carried out only once its row is durable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .broadcast import Broadcaster
from .gate_refs import gate_ref
from .principal import Principal
from .records import AUDIT, Recorder
from .registry import SessionRegistry
from .requests import AlreadyAudited, RequestError, attempted_target, request_note


def warned(result: dict[str, Any], warning: str | None) -> dict[str, Any]:
    """A reply with the warning `AuditLog.before` gave for an action carried out unaudited, if any."""
    return {**result, "warning": warning} if warning else result


def text_size(data: dict[str, Any]) -> int:
    """Bytes of a record's top-level text: what it costs in memory, roughly, when no line length is known."""
    return sum(len(v) for v in data.values() if isinstance(v, str))


class AuditLog:
    """Rows of the audit log: queued for the store and broadcast, waited on before an action is carried out."""

    def __init__(self, recorder: Recorder, broadcaster: Broadcaster, registry: SessionRegistry, *,
                 clock: Callable[[], float]) -> None:
        self.recorder = recorder
        self.broadcaster = broadcaster
        self.registry = registry
        self.clock = clock

    def row(self, session_id: str, data: dict[str, Any]) -> None:
        """One row as it is (a session's own, an alert's): queued for the store, broadcast to subscribers."""
        self.recorder.add("actions", AUDIT, {"session_id": session_id, **data}, text_size(data))
        self.broadcaster.broadcast("action", session_id, data, is_event=False)

    def record(self, who: Principal, session_id: str | None, action: str, target: str | None,
               note: str | None, outcome: str) -> int:
        """Queue an operator's row; the mark to wait on (`durably`) before saying it was done."""
        self.row(session_id or "", {"ts": self.clock(), "actor": who.actor, "client": who.client,
                                    **who.audit_facts(), "action": action, "target": target,
                                    "note": note, "outcome": outcome})
        return self.recorder.mark(AUDIT)

    async def durably(self, mark: int) -> bool:
        return await self.recorder.durable(AUDIT, mark)

    async def before(self, who: Principal, session_id: str | None, action: str, target: str | None,
                     note: str | None, outcome: str, *, stops: bool = False) -> str | None:
        """Record an operator action durably before it is carried out, or refuse it. An action that
        stops an agent (`stops`) is carried out anyway, since refusing it would leave a runaway agent
        running on a full disk: it returns the warning for the reply instead (the loss is counted)."""
        if await self.durably(self.record(who, session_id, action, target, note, outcome)):
            return None
        error = (self.recorder.health.last_error or "unknown error")[:200]
        if stops:
            return f"done, but the audit log could not be written ({error}); the row is counted as unwritten"
        raise AlreadyAudited(f"refused: the audit log could not be written ({error}); nothing was done. Free "
                             "some space (see 'loopwarden status'); kill, pause, deny and stop-daemon still work",
                             kind="daemon")

    async def refused(self, who: Principal, op: str, req: dict[str, Any], reason: str) -> None:
        """A refused operator action in the audit log: what it aimed at (a gate as SESSION:GATE), and why."""
        note = request_note(req) or request_note({"note": req.get("text")})
        target, sid, gate = attempted_target(req), await self._target_session(req), req.get("gate")
        if isinstance(gate, str):
            try:
                session, gate_id = await gate_ref(self.registry, gate)
                sid, target = session.spec.id, f"{session.spec.id}:{gate_id}"[:200]
            except RequestError:  # no such live gate: named as asked, its session by id
                if sid and ":" in gate:
                    target = f"{sid}:{gate.rsplit(':', 1)[1]}"[:200]
        self.record(who, sid, "stop-daemon" if op == "shutdown" else op, target, note, reason)

    async def _target_session(self, req: dict[str, Any]) -> str | None:
        """The session a request names (by `session`, a gate's SESSION:GATE or a gate given as its session),
        if it exists and is one."""
        gate = req.get("gate")
        ref = req.get("session") or (gate.rsplit(":", 1)[0] if isinstance(gate, str) else None)
        try:
            return await self.registry.resolve(ref) if ref else None
        except RequestError:
            return None
