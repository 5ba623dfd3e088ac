"""The daemon's hook operations: events from agents the user started (Claude Code, Codex...), judged in the
sessions they attach, and the claims their hooks make on the agents' processes.

Any process can send a hook event, so nothing in one is believed that /proc can tell instead: the agent
process is found by hook_claims.py (or is the claimed agent the hook already runs under), the new session's
settings and bounds by hook_intake.py, and a hook run inside a session loopwarden launched or adopted makes
no session at all. What differs from agent to agent is its hook adapter's (sessions/hooks.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..paths import Paths
from ..sessions.hooks import HookAdapter
from ..sessions.registry import hook_adapter
from ..supervisor.config import ConfigError
from ..supervisor.verdicts import SessionState
from .audit import AuditLog
from .contract import Supervised
from .daemon_health import DaemonHealth
from .hook_agents import HookClaims, TreeStop
from .hook_claims import hook_agent
from .hook_intake import bound_refusal, config_refusal, hook_config
from .hooked import HookedSession
from .lifecycle import Tasks
from .principal import Claim, Inside, Principal, claimed_by, descends_from, offline_locators
from .procfs import ProcId, ancestry
from .records import Recorder
from .registry import SessionRegistry
from .requests import RequestError
from .session import Sink
from .session_runs import SessionStarter

HOOKED_ENDED_KEPT = 200  # terminated hook sessions remembered, so later hook calls still stop their agent


def _seconds(value: Any) -> float:
    """A non-negative number of seconds from a request (anything else: 0)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0.0


class HookOperations:
    """`op_hook` and `op_hook_wait`, and what they need: the agent behind a hook, its attached session."""

    def __init__(self, paths: Paths, registry: SessionRegistry, starter: SessionStarter, recorder: Recorder,
                 audit: AuditLog, health: DaemonHealth, tasks: Tasks, *, sink: Sink, helpers: Callable[[], set[int]],
                 clock: Callable[[], float]) -> None:
        self.paths = paths
        self.registry = registry
        self.starter = starter
        self.sink = sink
        self.recorder = recorder
        self.audit = audit
        self.health = health
        self.tasks = tasks
        self.helpers = helpers  # the daemon's own children that are no agents (its guardian)
        self.clock = clock
        self.claims = HookClaims()  # the agent processes hooks claimed, for as long as each lives
        self.hooked: dict[str, HookedSession] = {}  # the adapter's key of the agent's session id -> its session
        self.attached: dict[str, HookedSession] = {}  # session id -> the attached session, while in the registry
        registry.on_release(self._released)

    def live_ids(self) -> list[str]:
        """The attached sessions that have not ended."""
        return [s.spec.id for s in self.hooked.values() if not s.final]

    async def op_hook(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """A hook event: judged in the attached session of its agent session id, made on first sight within
        the bounds. From inside a launched or adopted session: no opinion (that session judges the agent)."""
        event = req.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("session_id"), str) or not event["session_id"]:
            raise RequestError("hook needs an 'event' object with a 'session_id'")
        agent_session = event["session_id"][:200]
        try:
            adapter = hook_adapter(req.get("agent"))
        except ValueError as exc:
            raise RequestError(str(exc)) from None
        around = self._launched_or_adopted_around(who)
        if around is not None:
            where = f"session {around.session}" if around.session else "a supervised session"
            return {"session": None, "output": None, "ignored": f"the hook runs inside {where} ({around.how})"}
        agent = self._hook_agent(who, adapter)
        session = self.hooked.get(adapter.key_for(agent_session))
        over = session is not None and session.final
        if session is None or (over and (session.state != SessionState.TERMINATED or session.starts_afresh(event))):
            session = self._attach(adapter, agent_session, event, req, who, agent)
        if agent is not None:
            session.add_agent(agent)
        idle = req.get("idle")
        answer = session.answer(event, hold=_seconds(req.get("hold")),
                                idle=_seconds(idle) if idle is not None else None, holder=who.pid)
        if session.final and session.ignored_stop:  # told to stop, it called a tool anyway: stopped for real
            session.ignored_stop = False
            self.tasks.start_soon(session.stop_agent)
        await self.recorder.durable(session.spec.id, self.recorder.mark(session.spec.id))  # write ahead of it
        return answer

    def _hook_agent(self, who: Principal, adapter: HookAdapter) -> ProcId | None:
        """The agent process behind a hook: the claimed agent it already runs under (a renamed process below
        it is no agent of its own), else the nearest ancestor running the agent's program, claimed at once
        (whatever becomes of the session) so that its tools are inside either way."""
        covering = self.claims.covering(who.chain[1:])
        if covering is not None:
            return covering.root
        stop = {stat.pid for stat in ancestry(os.getpid())}  # never the daemon, nor whoever started it
        agent = hook_agent(who.chain, stop, adapter.programs)
        if agent is not None:
            self.claims.add(Claim(None, agent, f"the {adapter.title} process that ran a hook"))
        return agent

    def _attach(self, adapter: HookAdapter, agent_session: str, event: dict[str, Any], req: dict[str, Any],
                who: Principal, agent: ProcId | None) -> HookedSession:
        """A new attached session for an agent session id, within the operator's bounds and settings; one
        that had ended for the same id hands on its settings (a `loopwarden set` made on it stays)."""
        key = adapter.key_for(agent_session)
        before = self.hooked.get(key)
        try:
            config, loosened = (before.config, []) if before is not None else hook_config(
                self.paths, req.get("config_env"))
        except ConfigError as exc:
            raise RequestError(config_refusal(exc)) from None
        why = bound_refusal(self.hooked.values(), agent, config.hooks)
        if why:
            self.health.hook_refusals += 1
            raise RequestError(why, kind="refused")
        ended = [k for k, s in self.hooked.items() if s.final]
        stale = [k for k in ended if self.hooked[k].state != SessionState.TERMINATED]
        for old in stale + ended[:-HOOKED_ENDED_KEPT]:
            self.hooked.pop(old, None)
        session = self.hooked[key] = HookedSession(adapter, self.registry.new_id(), event, config, sink=self.sink,
                                                   claims=self.claims, clock=self.clock)
        self.attached[session.spec.id] = session
        self.starter.start(session)
        note = f"looser settings refused: {'; '.join(loosened)}"[:2000] if loosened else None
        self.audit.record(who, session.spec.id, "attach", agent_session, note, "watching")
        if loosened:
            session.say(f"the hook asked for {'; '.join(loosened)}; the operator's configuration stands (a hook "
                        "may only tighten it)")
        return session

    def _launched_or_adopted_around(self, who: Principal) -> Inside | None:
        """The launched or adopted session (or any daemon's agent) a process runs inside; None outside them
        and inside sessions attached by hooks."""
        claims = [claim for session in self.registry.sessions.values()
                  if not session.final and session.hook_key is None for claim in session.claims()]
        for locate in (claimed_by(claims), descends_from(os.getpid(), self.helpers()), *offline_locators()):
            inside = locate(who.chain)
            if inside is not None:
                return inside
        return None

    async def op_hook_wait(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """The answer to a PreToolUse that `hook` held (a gate or a pause), when it is known."""
        session = self.attached.get(await self.registry.resolve(req.get("session")))
        if session is None:
            raise RequestError("hook_wait needs an attached hook session")
        ticket = req.get("ticket")
        if not isinstance(ticket, int) or isinstance(ticket, bool):
            raise RequestError("hook_wait needs the 'ticket' that hook answered")
        try:
            return await session.wait(ticket, _seconds(req.get("hold")), holder=who.pid)
        except PermissionError as exc:
            raise RequestError(f"refused: {exc}", kind="refused") from None

    async def stop_ended_agent(self, sid: str) -> None:
        """`kill` of an attached session that has ended while its agent still runs: the agent stopped."""
        session = next((s for s in self.hooked.values() if s.spec.id == sid), None)
        if session is not None:
            await session.stop_agent()
            return

        def say(text: str) -> None:
            self.sink("log", sid, {"stream": "loopwarden", "text": text, "ts": self.clock()})

        below = f"a process below the stopped agent of session {sid}"
        await TreeStop().stop(self.claims.of(sid), 5.0, say,
                              keep=lambda proc: self.claims.add(Claim(sid, proc, below)))

    def _released(self, sid: str, session: Supervised | None) -> None:
        """A session left the registry: an attached one is no longer found by id; by its agent's session id only
        while terminated (later hook calls are still told to stop)."""
        self.attached.pop(sid, None)
        if session is None:
            return
        key = session.hook_key
        if key is not None and session.state != SessionState.TERMINATED and self.hooked.get(key) is session:
            del self.hooked[key]
