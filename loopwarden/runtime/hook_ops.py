"""The daemon's hook operations: events from agents the user started (Claude Code, Codex), judged in the
sessions they attach, and the claims their hooks make on the agents' processes.

Any process can send a hook event, so nothing in one is believed that /proc can tell instead: the agent
process is found by hook_claims.py (or is the claimed agent the hook already runs under), the new session's
settings and bounds by hook_intake.py, and a hook run inside a session loopwarden launched or adopted makes
no session at all.
"""

from __future__ import annotations

import os
from typing import Any

from ..supervisor.config import ConfigError
from ..supervisor.verdicts import SessionState
from .codex_hooked import hooked_kind
from .hook_agents import TreeStop
from .hook_claims import hook_agent
from .hook_intake import bound_refusal, config_refusal, hook_config
from .hooked import HookedSession
from .parts import DaemonParts, RequestError
from .principal import Claim, Inside, Principal, claimed_by, descends_from, offline_locators
from .procfs import ProcId, ancestry
from .registry import HOOKED_ENDED_KEPT



def _seconds(value: Any) -> float:
    """A non-negative number of seconds from a request (anything else: 0)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0.0


class HookOperations(DaemonParts):
    """`op_hook` and `op_hook_wait`, and what they need: the agent behind a hook, its attached session."""

    async def op_hook(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """A hook event: judged in the attached session of its agent session id, made on first sight within
        the bounds. From inside a launched or adopted session: no opinion (that session judges the agent)."""
        event = req.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("session_id"), str) or not event["session_id"]:
            raise RequestError("hook needs an 'event' object with a 'session_id'")
        agent_session = event["session_id"][:200]
        try:
            kind = hooked_kind(req.get("agent"))
        except ValueError as exc:
            raise RequestError(str(exc)) from None
        around = self._launched_or_adopted_around(who)
        if around is not None:
            where = f"session {around.session}" if around.session else "a supervised session"
            return {"session": None, "output": None, "ignored": f"the hook runs inside {where} ({around.how})"}
        agent = self._hook_agent(who, kind)
        session = self.hooked.get(kind.key_for(agent_session))
        over = session is not None and session.final
        if session is None or (over and (session.state != SessionState.TERMINATED or session.starts_afresh(event))):
            session = self._attach(kind, agent_session, event, req, who, agent)
        if agent is not None:
            session.add_agent(agent)
        idle = req.get("idle")
        answer = session.answer(event, hold=_seconds(req.get("hold")),
                                idle=_seconds(idle) if idle is not None else None, holder=who.pid)
        if session.final and session.ignored_stop:  # told to stop, it called a tool anyway: stopped for real
            session.ignored_stop = False
            self._tg.start_soon(session.stop_agent)
        await self.recorder.durable(session.spec.id, self.recorder.mark(session.spec.id))  # write ahead of it
        return answer

    def _hook_agent(self, who: Principal, kind: type[HookedSession]) -> ProcId | None:
        """The agent process behind a hook: the claimed agent it already runs under (a renamed process below
        it is no agent of its own), else the nearest ancestor running the agent's program, claimed at once
        (whatever becomes of the session) so that its tools are inside either way."""
        covering = self.hook_claims.covering(who.chain[1:])
        if covering is not None:
            return covering.root
        stop = {stat.pid for stat in ancestry(os.getpid())}  # never the daemon, nor whoever started it
        agent = hook_agent(who.chain, stop, kind.adapter.programs)
        if agent is not None:
            self.hook_claims.add(Claim(None, agent, f"the {kind.adapter.title} process that ran a hook"))
        return agent

    def _attach(self, kind: type[HookedSession], agent_session: str, event: dict[str, Any], req: dict[str, Any],
                who: Principal, agent: ProcId | None) -> HookedSession:
        """A new attached session for an agent session id, within the operator's bounds and settings; one
        that had ended for the same id hands on its settings (a `loopwarden set` made on it stays)."""
        before = self.hooked.get(kind.key_for(agent_session))
        try:
            config, loosened = (before.config, []) if before is not None else hook_config(
                self.paths, req.get("config_env"))
        except ConfigError as exc:
            raise RequestError(config_refusal(exc)) from None
        why = bound_refusal(self.hooked.values(), agent, config.hooks)
        if why:
            self.hook_refusals += 1
            raise RequestError(why, kind="refused")
        ended = [k for k, s in self.hooked.items() if s.final]
        stale = [k for k in ended if self.hooked[k].state != SessionState.TERMINATED]
        for old in stale + ended[:-HOOKED_ENDED_KEPT]:
            self.hooked.pop(old, None)
        session = self.hooked[kind.key_for(agent_session)] = kind(
            self._new_id(), event, config, sink=self.sink, claims=self.hook_claims, clock=self.clock)
        self.sessions[session.spec.id] = self.attached[session.spec.id] = session
        self._mark(session.spec.id)
        note = f"looser settings refused: {'; '.join(loosened)}"[:2000] if loosened else None
        self._audit(who, session.spec.id, "attach", agent_session, note, "watching")
        if loosened:
            session.say(f"the hook asked for {'; '.join(loosened)}; the operator's configuration stands (a hook "
                        "may only tighten it)")
        self._tg.start_soon(self._run_session, session)
        return session

    def _launched_or_adopted_around(self, who: Principal) -> Inside | None:
        """The launched or adopted session (or any daemon's agent) a process runs inside; None outside them
        and inside sessions attached by hooks."""
        claims = [claim for session in self.sessions.values() if not session.final and session.hook_key is None
                  for claim in session.claims()]
        for locate in (claimed_by(claims), descends_from(os.getpid(), self.helpers()), *offline_locators()):
            inside = locate(who.chain)
            if inside is not None:
                return inside
        return None

    async def op_hook_wait(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """The answer to a PreToolUse that `hook` held (a gate or a pause), when it is known."""
        session = self.attached.get(await self._resolve(req.get("session")))
        if session is None:
            raise RequestError("hook_wait needs an attached hook session")
        ticket = req.get("ticket")
        if not isinstance(ticket, int) or isinstance(ticket, bool):
            raise RequestError("hook_wait needs the 'ticket' that hook answered")
        try:
            return await session.wait(ticket, _seconds(req.get("hold")), holder=who.pid)
        except PermissionError as exc:
            raise RequestError(f"refused: {exc}", kind="refused") from None

    async def _stop_ended_agent(self, sid: str) -> None:
        """`kill` of an attached session that has ended while its agent still runs: the agent stopped."""
        session = next((s for s in self.hooked.values() if s.spec.id == sid), None)
        if session is not None:
            await session.stop_agent()
            return

        def say(text: str) -> None:
            self.sink("log", sid, {"stream": "loopwarden", "text": text, "ts": self.clock()})

        below = f"a process below the stopped agent of session {sid}"
        await TreeStop().stop(self.hook_claims.of(sid), 5.0, say,
                              keep=lambda proc: self.hook_claims.add(Claim(sid, proc, below)))
