"""The operations on one live session: decide its gates, grant, reset, set, inject, rewind, pause, resume, kill.

Each is refused before it is audited when the session cannot carry it out (contract.refusal), audited
durably before it is carried out, and a refusal or failure is in the audit log too.
"""

from __future__ import annotations

from typing import Any

from ..supervisor.config import Config, ConfigError, change, change_daemon, show_value, value_of
from ..supervisor.counters import RESETTABLE
from ..supervisor.gates import GateError
from ..supervisor.verdicts import SessionState
from .audit import AuditLog, warned
from .contract import Supervised, refusal
from .gate_refs import gate_ref
from .hook_ops import HookOperations
from .lifecycle import Tasks
from .principal import Principal
from .registry import SessionRegistry
from .spending import Spending
from .requests import AlreadyAudited, BadRequest, RequestError, request_note, set_values

INJECT_CHARS = 100_000  # operator text sent to an agent in one `inject`
REWIND_TURNS = 100  # turns one `rewind` may drop


class SessionOperations:
    """`op_approve`, `op_deny`, `op_grant`, `op_reset`, `op_set`, `op_inject`, `op_rewind`, `op_pause`,
    `op_resume`, `op_kill`."""

    def __init__(self, registry: SessionRegistry, audit: AuditLog, hooks: HookOperations, tasks: Tasks,
                 spending: Spending | None = None) -> None:
        self.registry = registry
        self.audit = audit
        self.hooks = hooks
        self.tasks = tasks
        self.spending = spending

    async def _decide(self, req: dict[str, Any], approve: bool, who: Principal) -> dict[str, Any]:
        note, verb = request_note(req), "approve" if approve else "deny"
        session, gate_id = await gate_ref(self.registry, req.get("gate"))
        ref = f"{session.spec.id}:{gate_id}"  # how the audit log and every reply name a gate
        cannot = refusal(session, verb)
        if cannot:
            raise RequestError(cannot)
        gate = session.health.gate(gate_id)
        if gate is None:
            raise RequestError(f"no gate {ref} (see 'loopwarden gates')")
        if not gate.pending:
            raise RequestError(f"gate {ref} was already {gate.status} by {gate.decided_by}")
        warning = await self.audit.before(who, session.spec.id, verb, ref, note, "done", stops=not approve)
        try:
            await session.decide(gate_id, approve, who.actor, note)
        except GateError as exc:  # decided meanwhile (an expiry, another console): say so in the audit too
            self.audit.record(who, session.spec.id, verb, ref, note, f"failed: {exc}")
            raise AlreadyAudited(str(exc)) from None
        return warned({"session": session.spec.id, "gate": gate_id, "ref": ref,
                       "status": "approved" if approve else "denied"}, warning)

    async def op_approve(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        return await self._decide(req, True, who)

    async def op_deny(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        return await self._decide(req, False, who)

    async def op_grant(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._capable(req, "grant")
        note = request_note(req)
        await self.audit.before(who, session.spec.id, "grant", None, note, "injected")
        verdict = session.grant(note)
        return {"session": session.spec.id, "message": verdict.message}

    async def op_reset(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._capable(req, "reset")
        counter = req.get("counter")
        if counter is not None and counter not in RESETTABLE:
            raise RequestError(f"unknown counter {str(counter)[:40]!r}; use one of {', '.join(sorted(RESETTABLE))}")
        await self.audit.before(who, session.spec.id, "reset", counter or "all", request_note(req), "done")
        session.reset(counter)
        return {"session": session.spec.id, "reset": counter or "all"}

    async def op_set(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Change a running session's limits (`values`: KEY -> value); the engine takes them at once.
        Replies `changed`: KEY -> [old, new], converted, for each key whose value moved. Without a session: the
        daemon's own keys (its budgets)."""
        if req.get("session") is None and self.spending is not None:
            return await self._set_daemon(req, who)
        session = await self.registry.live(req.get("session"))
        try:
            values = set_values(req.get("values"))
            config = change(session.config, values)
        except (BadRequest, ConfigError) as exc:
            raise RequestError(str(exc)) from None
        before = session.config
        moved = [k for k in values if value_of(before, k) != value_of(config, k)]
        note = "; ".join(f"{k}: {show_value(k, value_of(before, k))} -> {show_value(k, value_of(config, k))}"
                         for k in moved)
        await self.audit.before(who, session.spec.id, "set", ",".join(values)[:200], note or "no change", "done")
        before = session.config  # another `set` may have landed while the audit row was written: keep its keys
        session.reconfigure(change(before, values))
        after = session.config  # an attached session keeps its own rules (no stall)
        return {"session": session.spec.id,
                "changed": {k: [value_of(before, k), value_of(after, k)] for k in moved
                            if value_of(before, k) != value_of(after, k)}}

    async def _set_daemon(self, req: dict[str, Any], who: Principal) -> dict[str, Any]:
        """`loopwarden set budgets.day_usd=20`: the daemon's budgets, audited, then every live session told."""
        assert self.spending is not None
        try:
            values = set_values(req.get("values"))
            change_daemon(Config(budgets=self.spending.settings), values)
        except (BadRequest, ConfigError) as exc:
            raise RequestError(str(exc)) from None
        before = Config(budgets=self.spending.settings)
        after = change_daemon(before, values)
        note = "; ".join(f"{k}: {show_value(k, value_of(before, k))} -> {show_value(k, value_of(after, k))}"
                         for k in values if value_of(before, k) != value_of(after, k))
        await self.audit.before(who, None, "set", ",".join(values)[:200], note or "no change", "done")
        return {"session": None, "changed": self.spending.change(values)}

    async def op_inject(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._capable(req, "inject")
        text = req.get("text")
        if not isinstance(text, str) or not text.strip():
            raise RequestError("inject needs some text")
        if len(text) > INJECT_CHARS:
            raise RequestError(f"inject text is {len(text):,} characters; the limit is {INJECT_CHARS:,}")
        await self.audit.before(who, session.spec.id, "inject", None, text[:500], "sent")
        session.inject(text)
        return {"session": session.spec.id}

    async def op_rewind(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Drop the last `turns` turns of the agent's conversation and retry with the loop's evidence as guidance."""
        session = await self._capable(req, "rewind")
        turns = req.get("turns", 1)
        if not isinstance(turns, int) or isinstance(turns, bool) or not 1 <= turns <= REWIND_TURNS:
            raise RequestError(f"'turns' must be a whole number from 1 to {REWIND_TURNS}")
        note = request_note(req)
        await self.audit.before(who, session.spec.id, "rewind", f"{turns} turn{'s' if turns != 1 else ''}", note,
                                "rewinding")
        try:
            verdict = session.rewind(turns, note, by=who.actor)
        except ValueError as exc:
            self.audit.record(who, session.spec.id, "rewind", None, note, f"failed: {exc}")
            raise AlreadyAudited(f"session {session.spec.id}: {exc}") from None
        return {"session": session.spec.id, "turns": turns, "guidance": verdict.evidence["guidance"]}

    async def _capable(self, req: dict[str, Any], op: str) -> Supervised:
        """The live session a request names, if it can carry out `op` (see contract.NEEDS)."""
        session = await self.registry.live(req.get("session"))
        cannot = refusal(session, op)
        if cannot:
            raise RequestError(cannot)
        return session

    async def op_pause(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self.registry.live(req.get("session"))
        warning = await self.audit.before(who, session.spec.id, "pause", None, request_note(req), "done", stops=True)
        was = session.snapshot()["state"]
        session.pause()
        state = session.snapshot()["state"]
        return warned({"session": session.spec.id, "state": state, "changed": state != was}, warning)

    async def op_resume(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self.registry.live(req.get("session"))
        await self.audit.before(who, session.spec.id, "resume", None, request_note(req), "done")
        was = session.snapshot()["state"]
        session.resume()
        state = session.snapshot()["state"]
        return {"session": session.spec.id, "state": state, "changed": state != was}

    async def op_kill(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Stop a session. One attached by hooks that has ended while its agent process still runs (a
        terminated Codex calling its model on) has that process stopped."""
        sid = await self.registry.resolve(req.get("session"))
        live = self.registry.sessions.get(sid)
        if (live is None or live.final) and self.hooks.claims.of(sid):
            warning = await self.audit.before(who, sid, "kill", None, request_note(req),
                                              "stopping its agent process", stops=True)
            self.tasks.start_soon(self.hooks.stop_ended_agent, sid)
            return warned({"session": sid, "state": self.registry.snapshot(sid).get("state"),
                           "agent_pids": [p.pid for p in self.hooks.claims.of(sid)]}, warning)
        session = await self.registry.live(sid)
        note = request_note(req)
        warning = await self.audit.before(who, session.spec.id, "kill", None, note, "stopping", stops=True)
        if not session.kill_soon(note):  # (a launched one: by its ticker)
            self.tasks.start_soon(session.kill, note)
        return warned({"session": session.spec.id, "state": SessionState.STOPPING}, warning)
