"""An agent session the user started in their own terminal (Claude Code, Codex...), attached by its hooks
(`loopwarden hook HOOK_AGENT`); what differs from agent to agent is its adapter's (sessions/hooks.py).

There is no process of ours: events arrive as hook requests and each gets an answer (docs/claude-code-hooks.md).
Blocks become PreToolUse denials; engine and operator texts ride on the next answer that can carry
text; a gate or an operator's pause holds PreToolUse answers; kill and every terminate verdict make
the following answers stop the agent (Claude's `continue: false`, Codex's deny of every call).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from ..sessions.base import Capability
from ..sessions.hooks import HookAdapter
from ..supervisor.ladders import for_agent
from ..supervisor.config import Config, format_duration
from ..supervisor.events import Event, ToolCall, Usage
from ..supervisor.health import GATED, TERMINATED, SessionHealth
from ..supervisor.verdicts import FINAL_STATES, Action, SessionState, Verdict
from .hook_agents import AgentProcesses, HookClaims, TreeStop
from .principal import Claim
from .procfs import ProcId, ProcTable
from .session import Resources, SessionSpec, Sink
from .snapshot import build

IDLE_DEFAULT = 600.0  # a finished turn (Stop) with no further event for this long ends the session
HOLD_MAX = 3600.0
IDLE_TICK = 60.0
HELD_KEPT = 1000  # held PreToolUse answers remembered (a hook that never asks again is forgotten)
STOP_GRACE = 3.0  # a tool call this soon after the stop was in flight with it (parallel calls), not defiance
TEXT_KEPT = 20  # queued texts for the model; older ones are dropped first
_TEXT_ACTIONS = (Action.NUDGE, Action.ESCALATE, Action.UNBLOCK_AUTHORITY, Action.FORCE_NEXT)


class HookedSession:
    """One agent session id (the hook's `session_id`); `answer(event)` judges a hook event and returns the
    hook's reply, in its adapter's form."""

    def __init__(self, adapter: HookAdapter, sid: str, event: dict[str, Any], config: Config, *, sink: Sink,
                 claims: HookClaims | None = None, clock: Callable[[], float] = time.time) -> None:
        self.adapter = adapter
        self.agent_session = str(event.get("session_id"))  # the agent's own session id
        label = adapter.label
        cwd = event.get("cwd") if isinstance(event.get("cwd"), str) else None
        name = f"{label}:{Path(cwd).name or cwd}" if cwd else f"{label}:{self.agent_session[:8]}"
        self.spec = SessionSpec(id=sid, name=name[:80], command=adapter.resume_command(self.agent_session),
                                adapter=adapter.name, cwd=cwd)
        config = for_agent(config, adapter.agent, adapter.ladder)  # Codex's hooks climb OpenAI's models
        self.config = replace(config, limits=replace(config.limits, stall_timeout=0.0))  # the user may think
        self.sink = sink
        self.clock = clock
        self.created_at = self.started_at = self.last_event_at = clock()
        self.health = SessionHealth(self.config, started_at=self.started_at)
        self.state = SessionState.RUNNING
        self.ended_at: float | None = None
        self.exit_code: int | None = None
        self.pid: int | None = None  # the agent's process is the user's: signalled only to stop it once terminated
        self.agents = AgentProcesses()
        self.register = claims if claims is not None else HookClaims()  # the daemon's: claims outlive sessions
        self.stopper = TreeStop()
        self.daemon_stopping = False  # the daemon's own stop ended it: the user's agent is never signalled
        self.ended_as: str | None = None  # how it ended when no exit code says it: "idle: ..."
        self.killed = False  # by an operator: its agent process is stopped at once
        self.ignored_stop = False  # a tool call came after it was told to stop: its agent process is stopped
        self.stopping = False
        self.paused = self.operator_paused = False
        self.resources = Resources()
        self.tool_calls = 0
        self.idle = IDLE_DEFAULT
        self.turn_over = False  # a Stop came and nothing since: the idle clock runs
        self.held: dict[int, tuple[Verdict | None, int | None]] = {}  # ticket (the call's seq) -> its block
        # verdict and the pid of the hook that holds it (no other process may take its answer)
        self.texts: list[tuple[str, bool]] = []  # (text, essential): essential texts also block a Stop
        self.turn: str | None = None  # the agent's turn of the last event judged while the session was live
        self._seq = 0
        self._changed = anyio.Event()
        self._gates_stored: dict[str, str] = {}  # gate id -> the status last stored

    def reconfigure(self, config: Config) -> None:
        """New limits from `loopwarden set` (still no stall: the user may think); the clock loop wakes."""
        self.config = replace(config, limits=replace(config.limits, stall_timeout=0.0))
        self.health.reconfigure(self.config)
        if self.health.release_budget(self.clock()):  # a budget raised: the held PreToolUse answers go
            self._record([])
        self._changed_now()

    def outside_budgets(self, reached: dict[str, dict[str, Any]]) -> None:
        """The daemon's budgets reached now: the next PreToolUse waits while any is; none releases the held."""
        if self.health.outside_budgets(reached, self.clock()):
            self._record([])
        self._changed_now()

    @property
    def hook_key(self) -> str:
        return self.adapter.key_for(self.agent_session)

    def starts_afresh(self, event: dict[str, Any]) -> bool:
        """Whether `event`, arriving after this session was terminated, starts a new one: a human came back."""
        return self.adapter.starts_afresh(event, self.turn)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def terminated(self) -> bool:
        return self.state == SessionState.TERMINATED

    @property
    def blocked(self) -> bool:
        """PreToolUse answers wait: a gate is pending or an operator paused the session."""
        return self.health.state == GATED or self.operator_paused

    # ---- the hook path ------------------------------------------------------
    def answer(self, event: dict[str, Any], hold: float, idle: float | None = None,
               holder: int | None = None) -> dict[str, Any]:
        """Judge one hook event (sent by pid `holder`); the result is `{session, output}` or, while
        blocked, `{session, wait, ticket}`."""
        name = str(event.get("hook_event_name") or "")
        if not self.final:
            turn = self.adapter.turn_of(event)
            if turn is not None:
                self.turn = turn
        now = self.clock()
        self.last_event_at = now
        if idle is not None:
            self.idle = idle
        if self.state == SessionState.TERMINATED:
            late = self.ended_at is not None and now - self.ended_at >= STOP_GRACE  # not a parallel call in flight
            self.ignored_stop = self.ignored_stop or (name == "PreToolUse" and late and not self.daemon_stopping)
            return self._reply(None if name == "SessionEnd" else self.adapter.halt(name, self._end_text()))
        self._seq += 1
        block: Verdict | None = None
        for item in self.adapter.events(event, self._seq, now):
            for verdict in self._judge(item):
                if verdict.action == Action.BLOCK and type(item) is ToolCall:
                    block = verdict
        self.turn_over = self.adapter.turn_over(name)
        if self.terminated:  # a verdict just now ended it
            return self._reply(self.adapter.halt(name, self._end_text()))
        if name == "SessionEnd":
            if not self.blocked:  # paused or gated, it ends only by an operator's hand (deny, kill)
                self._end(SessionState.EXITED, 0)
            return self._reply(None)
        if name == "PreToolUse" and self.blocked:
            if hold <= 0:
                return self._reply(self._released(block))
            self._remember(self._seq, block, holder)
            return {"session": self.spec.id, "wait": min(hold, HOLD_MAX), "ticket": self._seq,
                    "gates": [g.id for g in self.health.pending_gates()]}
        self._changed_now()
        return self._reply(self._output(name, block))

    async def wait(self, ticket: int, hold: float, holder: int | None = None) -> dict[str, Any]:
        """The answer to a held PreToolUse, once the gate is decided or the session resumed, or after
        `hold` seconds: then a paused session denies the call and a gate answers by `gates.on_timeout`.
        Only the hook that was given the ticket may wait on it (PermissionError); an unknown ticket is
        answered as a call with no verdict of its own, never simply allowed while the session is held."""
        owner = self.held.get(ticket, (None, None))[1]
        if owner is not None and holder is not None and owner != holder:
            raise PermissionError(f"ticket {ticket} belongs to another hook process (pid {owner})")
        with anyio.move_on_after(max(0.0, min(hold, HOLD_MAX))):
            while self.blocked and not self.final:
                await self._changed.wait()
        return self._reply(self._released(self.held.pop(ticket, (None, None))[0]))

    def _released(self, block: Verdict | None) -> dict[str, Any] | None:
        """A held PreToolUse's answer: the normal one once unblocked, else the timeout's."""
        if self.final:
            return self.adapter.halt("PreToolUse", self._end_text()) if self.state == SessionState.TERMINATED else None
        if self.operator_paused:
            return self.adapter.pre_tool_use(deny="Paused by the operator supervising this session; wait for them, "
                                                  "then try again.")
        if self.blocked and self.config.gates.on_timeout != "approve":
            gates = ", ".join(f"{g.id} ({g.reason})" for g in self.health.pending_gates())
            return self.adapter.pre_tool_use(deny=f"Waiting for a human decision on {gates}. Do not repeat this "
                                                  "call; explain where you are stuck instead.")
        return self._output("PreToolUse", block)

    def _judge(self, event: Event) -> list[Verdict]:
        verdicts = self.health.observe(event, self.clock())
        self.tool_calls += type(event) is ToolCall
        self.sink("event", self.spec.id, {**event.to_dict(), "seq": event.seq})
        if type(event) is Usage and event.cost_usd:
            self.sink("spend", self.spec.id, {"usd": event.cost_usd, "ts": self.clock()})
        self._record(verdicts)
        return verdicts

    def _record(self, verdicts: list[Verdict]) -> None:
        """Store verdicts and the gates they open; queue their texts for the model."""
        now = self.clock()
        for verdict in verdicts:
            self.sink("verdict", self.spec.id, {**verdict.to_dict(), "ts": now})
            if verdict.action in _TEXT_ACTIONS and verdict.message:
                self._queue(verdict.message, essential=verdict.rule == "operator")
        for gate in self.health.all_gates():  # opened or decided since the last time
            if self._gates_stored.get(gate.id) != gate.status:
                self._gates_stored[gate.id] = gate.status
                self.sink("gate", self.spec.id, gate.to_dict())
        if self.health.state == TERMINATED and not self.final:
            self._end(SessionState.TERMINATED)
        self._changed_now()

    def _output(self, name: str, block: Verdict | None) -> dict[str, Any] | None:
        """The answer for a judged event, taking the queued texts it can carry."""
        adapter = self.adapter
        if name == "PreToolUse":
            context = self._take()
            return adapter.pre_tool_use(deny=block.message or block.reason if block else None, context=context)
        if name in adapter.context_events:
            return adapter.with_context(name, self._take())
        if name == "Stop" and adapter.blocks_stop:
            essential = [text for text, must in self.texts if must]
            self.texts.clear()  # the turn is over; an engine nudge about it is moot
            return adapter.stop_block("\n\n".join(essential)) if essential else None
        return None

    def _queue(self, text: str, *, essential: bool) -> None:
        self.texts.append((text, essential))
        del self.texts[:-TEXT_KEPT]

    def _take(self) -> str | None:
        texts, self.texts = [text for text, _ in self.texts], []
        return "\n\n".join(texts) or None

    def _remember(self, ticket: int, block: Verdict | None, holder: int | None) -> None:
        self.held[ticket] = (block, holder)
        for old in list(self.held)[:-HELD_KEPT]:
            del self.held[old]

    def _reply(self, output: dict[str, Any] | None) -> dict[str, Any]:
        return {"session": self.spec.id, "output": output}

    def _end_text(self) -> str:
        termination = self.health.termination
        if not termination:
            return "loopwarden: session ended"
        return f"loopwarden: {termination.message or termination.reason}"

    # ---- time: max_runtime, gate expiry, idle end ------------------------------
    async def run(self) -> None:
        self._publish()
        while not self.final:
            wake = self._next_wake()
            delay = IDLE_TICK if wake is None else min(IDLE_TICK, max(0.0, wake - self.clock()))
            with anyio.move_on_after(delay + 0.001):
                await self._changed.wait()
            if self.final:
                break
            now = self.clock()
            verdicts = self.health.tick(now)
            if verdicts:
                self._record(verdicts)
                self._publish()
            if not self.final:
                self._end_if_idle(now)
        self._publish()
        if self.state == SessionState.TERMINATED and not self.daemon_stopping and (
                self.killed or not self.adapter.obeys_stop):
            await self.stop_agent()

    def _next_wake(self) -> float | None:
        """When the clock next matters: a deadline of the engine's, or an idle end."""
        times = [self.health.next_deadline()]
        if self.turn_over and self.idle:
            times.append(self.last_event_at + self.idle)
        if self.config.hooks.idle_timeout:
            times.append(self.last_event_at + self.config.hooks.idle_timeout)
        return min((t for t in times if t is not None), default=None)

    def _end_if_idle(self, now: float) -> None:
        """A finished turn with no event since for `idle` is a session the user left; no event at all for
        hooks.idle_timeout ends it as idle (an agent that never sends Stop, or one that forged a session)."""
        if self.blocked:  # a gate or a pause waits for a person, however long they take
            return
        silence = now - self.last_event_at
        if self.turn_over and self.idle and silence >= self.idle:
            self._end(SessionState.EXITED, 0)
        elif self.config.hooks.idle_timeout and silence >= self.config.hooks.idle_timeout:
            self._end(SessionState.EXITED, None, f"idle: no hook event for {format_duration(silence)}")

    def _end(self, state: SessionState, exit_code: int | None = None, ended_as: str | None = None) -> None:
        self.state, self.exit_code, self.ended_at, self.ended_as = state, exit_code, self.clock(), ended_as
        self.held.clear()
        self._changed_now()
        self._publish()

    def _changed_now(self) -> None:
        """Wake whatever waits on this session (held answers, the timer)."""
        self._changed.set()
        self._changed = anyio.Event()
        self._publish()

    # ---- operator actions (the daemon's ops) ------------------------------------
    async def decide(self, gate_id: str, approve: bool, by: str, note: str | None) -> list[Verdict]:
        verdicts = self.health.decide(gate_id, approve, self.clock(), by=by, note=note)
        self._record(verdicts)
        return verdicts

    def grant(self, note: str | None) -> Verdict:
        verdict = self.health.grant_authority(self.clock(), note=note)
        self._record([verdict])
        self._queue(verdict.message or "", essential=True)
        return verdict

    def reset(self, counter: str | None) -> None:
        self.health.reset_counters(counter)
        self._publish()

    def inject(self, text: str) -> bool:
        self._queue(f"Message from the operator supervising this session (via loopwarden): {text}", essential=True)
        self._publish()
        return True

    def pause(self) -> None:
        self.paused = self.operator_paused = True
        self._changed_now()

    def resume(self) -> None:
        self.paused = self.operator_paused = False
        self._changed_now()

    def kill_soon(self, note: str | None = None) -> bool:
        """No ticker of its own: `kill` runs in a task."""
        return False

    def rewind(self, turns: int, note: str | None, *, by: str = "operator") -> Verdict:
        raise ValueError(f"the {self.adapter.name} adapter cannot rewind a conversation")

    restartable = False  # the agent is the user's, started in their terminal

    def failed(self) -> tuple[str | None, str | None, list[str], int | None]:
        return None, None, [], None

    async def kill(self, note: str | None = None, *, daemon_stopping: bool = False) -> None:
        """Mark the session terminated (the next hook answer says stop) and stop its agent process; the
        daemon's own stop signals nothing, since the agent is the user's and outlives its supervisor."""
        if self.final:
            return
        self.killed, self.daemon_stopping = not daemon_stopping, daemon_stopping
        self._record(self.health.kill_terminate(self.clock(), note, daemon_stopping=daemon_stopping))
        if not self.final:
            self._end(SessionState.TERMINATED)

    async def sample(self, children: dict[int, list[int]] | None = None) -> None:
        """No process of ours to measure; a session whose claimed agent processes have all exited has ended
        (no SessionEnd comes from a killed agent)."""
        if self.agents.prune() and not self.final:
            self._end(SessionState.EXITED, None, "its agent process exited")

    def _publish(self) -> None:
        self.sink("session", self.spec.id, {})

    def claims(self) -> list[Claim]:
        """None of its own: the agent processes it claimed are in the daemon's register, which outlives it."""
        return []

    @property
    def claim_what(self) -> str:
        return f"the {self.adapter.title} process that ran its hook"

    def add_agent(self, agent: ProcId) -> None:
        """An agent process that ran one of its hooks: claimed for this session (in the register even when
        the session holds AGENTS_KEPT already; the first ones are never dropped for it)."""
        self.agents.add(agent)
        self.register.add(Claim(self.spec.id, agent, self.claim_what))

    async def stop_agent(self) -> list[int]:
        """Stop its agent processes for real, with everything below them (SIGTERM, SIGKILL after
        limits.kill_grace), saying so in the session's log: the pids signalled. After a kill, after a
        termination of an agent that does not obey a hook's stop, and when a terminated agent calls a tool
        anyway; never when the daemon itself stops."""
        roots = {*self.agents.living(), *self.register.of(self.spec.id)}
        below = f"a process below the stopped {self.adapter.title} of session {self.spec.id}"
        return await self.stopper.stop(roots, self.config.limits.kill_grace, self.say,
                                       keep=lambda proc: self.register.add(Claim(self.spec.id, proc, below)))

    def say(self, text: str) -> None:
        """A line from loopwarden in the session's log (`logs`, the console's stream)."""
        self.sink("log", self.spec.id, {"stream": "loopwarden", "text": text, "ts": self.clock()})

    spiller = None  # the agent's tool output never passes through loopwarden
    counts_loops = True
    deadline: float | None = None

    @property
    def capabilities(self) -> Capability:
        return self.adapter.capabilities

    def observe(self, table: ProcTable) -> None:
        """The agent's processes are the user's: none to follow."""

    def kill_now(self) -> None:
        """Nothing to signal: the hook answers stop the agent."""

    def snapshot(self) -> dict[str, Any]:
        return build(
            sid=self.spec.id, name=self.spec.name, command=self.spec.command, cwd=self.spec.cwd, env_keys=[],
            config=self.config, health=self.health, state=self.state, paused=self.operator_paused,
            adapter=self.adapter.name, agent=self.adapter.agent, caps=self.capabilities, pid=None,
            created_at=self.created_at, started_at=self.started_at, ended_at=self.ended_at, now=self.clock(),
            exit_code=self.exit_code, handshake=True, tool_calls=self.tool_calls, gates_open=not self.final,
            validation_failures=self.health.validation_total,
            extra={self.adapter.session_field: self.agent_session, "agent_pids": list(self.agents.procs),
                   **({"ended_as": self.ended_as} if self.ended_as else {})}).to_dict()
