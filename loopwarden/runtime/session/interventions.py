"""Carrying out the engine's verdicts on a live agent: lines on its stdin, held calls, signals, its stop."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

import anyio

from ...sessions.base import Adapter
from ...supervisor import kinds
from ...supervisor.events import Event, ToolCall
from ...supervisor.gates import GateError
from ...supervisor.health import GATED, TERMINATED, SessionHealth
from ...supervisor.opinion import askable
from ...supervisor.verdicts import Action, Termination, Verdict
from .. import inputs
from ..opinion import Outcome, SecondOpinion
from .agent import Agent
from .journal import Journal
from .process import AgentProcess
from .spills import Spills
from .tasks import Tasks, Wake
from .writer import InputWriter

INJECT_KINDS: Final[dict[Action, str]] = {
    Action.NUDGE: "nudge",
    Action.UNBLOCK_AUTHORITY: "authority",
    Action.FORCE_NEXT: "force_next",
    Action.ESCALATE: "escalate",
}
_INJECTED: Final = (Action.NUDGE, Action.UNBLOCK_AUTHORITY, Action.FORCE_NEXT)  # ... when they carry a message


class Interventions:
    """What the session does about a verdict: a block answers the call (or, for an agent that cannot be vetoed,
    a nudge), a gate holds the call (or stops the group), a nudge is injected, a spill is told, a terminate stops
    the agent. Ambiguous verdicts are put to a second opinion first (runtime/opinion.py)."""

    def __init__(self, sid: str, agent: Agent, health: SessionHealth, journal: Journal, writer: InputWriter,
                 process: AgentProcess, spills: Spills, tasks: Tasks, wake: Wake, opinion: SecondOpinion | None,
                 clock: Callable[[], float]) -> None:
        self.sid = sid
        self.agent = agent
        self.health = health
        self.journal = journal
        self.writer = writer
        self.process = process
        self.spills = spills
        self.tasks = tasks
        self.wake = wake
        self.opinion = opinion
        self.clock = clock
        self.held: deque[tuple[ToolCall, Verdict | None]] = deque()  # calls waiting for a gate, with their block
        self.kill_requested: str | None = None  # a kill that came while the process was starting
        self._gates_stored: set[str] = set()
        self._opinions_spent = False  # said once that opinion.max_calls is reached

    async def carry_out(self, verdicts: list[Verdict], event: Event | None) -> None:
        end = self.act(verdicts, event)
        if end is not None:
            await self.end(end)

    def act(self, verdicts: list[Verdict], event: Event | None, publish: bool = True) -> Verdict | None:
        """Carry out verdicts (second opinions asked first) up to one that ends the session, which is returned for
        the caller to await (`end`); None when all were carried out. `publish=False`: the caller publishes the
        session's change (once per chunk of stdout, not per event)."""
        if self.opinion is not None and verdicts:
            verdicts = self._ask_opinions(verdicts)
        adapter = self.agent.adapter
        kind = type(event)
        if kind is kinds.HELLO:
            reply = adapter.hello_reply(event, self.sid, self.health.config.spill.threshold_chars)  # type: ignore[arg-type]
            if reply:
                self.writer.send(reply)
        block: Verdict | None = None
        for verdict in verdicts:
            if verdict.action == Action.TERMINATE:
                return verdict
            if self._apply(verdict, event, adapter):
                block = verdict
        gated = self.health.state == GATED
        if kind is kinds.TOOL_CALL:
            if gated and adapter.can_veto:
                self.held.append((event, block))  # type: ignore[arg-type]
            else:
                line = adapter.verdict_line(event, block)  # type: ignore[arg-type]
                if line:
                    self.writer.send(line)
        if gated and not adapter.can_veto:
            self.process.hold()
        if verdicts and any(v.gate_id for v in verdicts):
            self.wake.set()
        if publish:
            self.journal.publish()
        return None

    def _apply(self, verdict: Verdict, event: Event | None, adapter: Adapter) -> bool:
        """One verdict short of an end; True when it blocks `event`, a call (answered once all are carried out)."""
        action = verdict.action
        if action == Action.BLOCK and type(event) is kinds.TOOL_CALL:
            if not adapter.can_veto:
                self.writer.inject(verdict.message or verdict.reason, "nudge", verdict.rule)
            return True
        if action == Action.SPILL and type(event) is kinds.TOOL_RESULT:
            line = self.spills.line(adapter, event)
            if line:
                self.writer.send(line)
        elif action in _INJECTED and verdict.message:
            self.writer.inject(verdict.message, INJECT_KINDS.get(action, "nudge"), verdict.rule)
        elif action == Action.ESCALATE and verdict.message:
            self.writer.inject(verdict.message, "escalate", verdict.rule, verdict.target)
        return False

    async def end(self, verdict: Verdict) -> None:
        """A verdict that ends the session: the stop (its grace is awaited)."""
        await self.stop(verdict.termination or Termination.OPERATOR, verdict.reason)
        self.journal.publish()

    def drop_held(self) -> None:
        """Forget the calls waiting for a gate, unanswered: a rewind drops the turns that made them (the agent's
        adapter resolves them)."""
        self.held.clear()

    def after_gates(self) -> None:
        """Gates decided by anyone (an operator, an expiry policy, a second opinion): store them, release what they
        held."""
        for gate in self.health.decided_gates():
            if gate.id not in self._gates_stored:
                self._gates_stored.add(gate.id)
                self.journal.sink("gate", gate.to_dict())
        if self.health.state != GATED:
            while self.held and self.health.state != GATED:
                call, block = self.held.popleft()
                line = self.agent.adapter.verdict_line(call, block)
                if line:
                    self.writer.send(line)
            self.writer.send_replies()
            if not self.process.operator_paused and self.health.state != TERMINATED:
                self.process.release()

    # ---- the end ---------------------------------------------------------------
    async def stop(self, reason: Termination, message: str, *, again: bool = False) -> None:
        """A `stop` line, then SIGTERM to every process of the session and SIGKILL for those still there after
        `limits.kill_grace`. An adapter with a `stop_grace` also gets its stdin closed and that long to exit
        before the SIGTERM. When the daemon is stopping, every wait ends at its deadline. `again`: even if it is
        stopping already (a failure of the supervisor's own)."""
        process = self.process
        if not process.begin_stop(again):
            return
        self.journal.publish()
        adapter = self.agent.adapter
        line = adapter.stop_line(str(reason), message)
        if line:
            self.writer.send(line)
        process.release()
        if line and adapter.stop_grace:  # the agent may wind down by itself (Claude Code: interrupt)
            self.writer.send(b"")
            await process.exit_within(adapter.stop_grace)
        await process.end_all("after the stop", self.health.config.limits.kill_grace)
        process.group_done()

    async def kill(self, note: str | None = None, *, daemon_stopping: bool = False) -> None:
        """An operator's kill (or the daemon's stop); a session already stopping keeps the reason it is stopping
        for."""
        if self.process.stopping or self.process.final:
            return
        now = self.clock()
        verdicts = self.health.kill_terminate(now, note, daemon_stopping=daemon_stopping)
        self.journal.record(verdicts, now)
        reason = verdicts[0].reason if verdicts else "operator"
        if self.process.process is None:
            self.kill_requested = reason  # still starting: the session stops it as soon as it exists
            self.process.containment.abandon_start()
            return
        await self.stop(self.health.termination_reason or Termination.OPERATOR, reason)
        self.journal.publish()

    async def stop_deaf(self, text: str) -> None:
        """Stop an agent that stopped reading its input: what waits for it would only grow."""
        now = self.clock()
        verdicts = self.health.supervisor_terminate(Termination.VALIDATION_FAILURE, text, now)
        self.journal.record(verdicts, now)
        await self.stop(Termination.VALIDATION_FAILURE, text)
        self.journal.publish()

    # ---- second opinions (runtime/opinion.py) ------------------------------
    def _ask_opinions(self, verdicts: list[Verdict]) -> list[Verdict]:
        """Start a second opinion on each ambiguous verdict; the verdicts to carry out now. A nudge waits
        for the answer; a gate is open meanwhile (it holds the agent, as it would for a human)."""
        opinion = self.opinion
        assert opinion is not None
        now: list[Verdict] = []
        for verdict in verdicts:
            kind = askable(verdict)
            if kind is None or self.tasks.group is None or not opinion.available():
                if kind is not None and opinion.used_up and not self._opinions_spent:
                    self._opinions_spent = True
                    self.journal.report(f"second opinion: the session's {opinion.cfg.max_calls} questions are "
                                        "asked (opinion.max_calls); the rules decide alone from now on")
                now.append(verdict)
                continue
            opinion.busy = True  # taken now: the next ambiguous verdict is carried out as the rule says
            self.tasks.start_other(self._second_opinion, kind, verdict, name=f"{self.sid} _second_opinion")
            if verdict.gate_id:
                now.append(verdict)
        return now

    async def _second_opinion(self, kind: str, verdict: Verdict) -> None:
        """Ask, audit, then withhold the verdict (progress) or carry it out as the rule said."""
        opinion = self.opinion
        assert opinion is not None
        try:
            out = await opinion.ask(kind, verdict)
        except anyio.get_cancelled_exc_class():  # the session ended first: the call is audited all the same
            ended = Outcome(opinion.cfg.model, failure="the session ended before the answer")
            self.journal.sink("action", opinion.audit(kind, verdict, ended, self.clock()))
            raise
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not end supervision: the rule decides
            opinion.busy = False
            self.journal.report(f"second opinion failed ({type(exc).__name__}); the rule's verdict stands", error=True)
            out = None
        if out is not None:
            self.journal.sink("action", opinion.audit(kind, verdict, out, self.clock()))
            self.journal.report(f"second opinion on {verdict.rule} ({verdict.action}): {out.outcome}")
        if self.process.final or self.process.stopping:
            return
        if out is None or not out.overrules:
            if not verdict.gate_id:
                verdict.ask = None  # asked once: carried out now as the rule said
                await self.carry_out([verdict], None)
            return
        assert out.answer is not None
        self.journal.record([Verdict(Action.ALLOW, "second-opinion", f"{verdict.rule} {verdict.action} withheld: "
                                     f"progress at {out.answer.confidence:.2f}: {out.answer.reason}",
                                     seq=verdict.seq, evidence={"withheld": verdict.to_dict()})])
        if verdict.gate_id:
            now = self.clock()
            try:
                decided = self.health.decide(verdict.gate_id, True, now, by="second-opinion")
            except GateError:
                return  # a human (or an expiry) decided it first
            self.journal.took(inputs.decided(verdict.gate_id, True, "second-opinion", None), now)
            self.wake.set()
            self.journal.record(decided, now)
            self.after_gates()
            self.journal.publish()
