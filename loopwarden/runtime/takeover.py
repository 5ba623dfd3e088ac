"""`takeover`: an operator takes a session's conversation over in the agent's own interactive program. The
daemon's part: the handover audited, the supervised run stopped (its turn interrupted first), and the
operator leaving the program audited as the hand back."""

from __future__ import annotations

from typing import Any

from ..supervisor.verdicts import FINAL_STATES
from .audit import AuditLog
from .lifecycle import Tasks
from .principal import Principal
from .registry import SessionRegistry
from .requests import RequestError, request_note

TAKEN_OVER = "taken over by the operator"


class TakeoverOperations:
    """`op_takeover`: phase `begin` (audited, then the live run stopped) and `end` (the hand back, audited)."""

    def __init__(self, registry: SessionRegistry, audit: AuditLog, tasks: Tasks) -> None:
        self.registry = registry
        self.audit = audit
        self.tasks = tasks

    async def op_takeover(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        sid = await self.registry.resolve(req.get("session"))
        snap = self.registry.snapshot(sid)
        conversation = snap.get("conversation")
        if not isinstance(conversation, str) or not conversation:
            raise RequestError(f"session {sid} has no conversation id, so it cannot be taken over in its agent's own "
                               "program")
        phase = req.get("phase")
        if phase == "end":
            self.audit.record(who, sid, "handback", conversation, request_note(req),
                              "the operator left the agent's program")
            return {"session": sid}
        if phase != "begin":
            raise RequestError("takeover needs a phase: begin or end")
        warning = await self.audit.before(who, sid, "takeover", conversation, request_note(req), TAKEN_OVER,
                                          stops=True)
        session = self.registry.sessions.get(sid)
        if session is not None and not session.final:
            self.tasks.start_soon(session.kill, TAKEN_OVER)
        return {"session": sid, "conversation": conversation, "adapter": snap.get("adapter"),
                "command": snap.get("command"), "cwd": snap.get("cwd"),
                "stopping": snap.get("state") not in FINAL_STATES, **({"warning": warning} if warning else {})}
