"""What an operator does to a live session (through the daemon): decide gates, grant, inject, pause, kill..."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...supervisor.config import Config
from .. import inputs
from ...supervisor.health import GATED, SessionHealth
from ...supervisor.verdicts import SessionState, Verdict
from .agent import Agent
from .interventions import Interventions
from .journal import Journal
from .process import AgentProcess
from .spec import SessionSpec
from .tasks import Tasks, Wake
from .ticker import Ticker
from .writer import InputWriter


class OperatorControls:
    """The operations the daemon carries out on a launched session, each recorded and published."""

    def __init__(self, spec: SessionSpec, agent: Agent, health: SessionHealth, journal: Journal,
                 writer: InputWriter, process: AgentProcess, interventions: Interventions, ticker: Ticker,
                 tasks: Tasks, wake: Wake, clock: Callable[[], float]) -> None:
        self.spec = spec
        self.agent = agent
        self.health = health
        self.journal = journal
        self.writer = writer
        self.process = process
        self.interventions = interventions
        self.ticker = ticker
        self.tasks = tasks
        self.wake = wake
        self.clock = clock

    def reconfigure(self, config: Config) -> None:
        """New limits from `loopwarden set`: the engine takes them, the ticker wakes (a deadline moved)."""
        given = inputs.reconfigured(self.health.config, config)
        now = self.clock()
        self.health.reconfigure(config)
        released = self.health.release_budget(now)  # a budget raised: the call it held goes through
        self.process.kept_limits(config.limits.max_runtime, config.limits.kill_grace)
        self.journal.took(given, now)
        self.wake.set()
        if released:
            self.interventions.after_gates()
        self.journal.publish()

    def outside_budgets(self, reached: dict[str, dict[str, Any]]) -> None:
        """The daemon's budgets reached now (its day's, this session's project's): the next call waits while any
        is; none any more releases what they held."""
        now = self.clock()
        released = self.health.outside_budgets(reached, now)
        self.journal.took(inputs.budgets(reached), now)
        if released:
            self.wake.set()
            self.interventions.after_gates()
        self.journal.publish()

    async def decide(self, gate_id: str, approve: bool, by: str, note: str | None) -> list[Verdict]:
        """Approve or deny a gate; raises GateError for an unknown or decided gate."""
        now = self.clock()
        verdicts = self.health.decide(gate_id, approve, now, by=by, note=note)
        self.journal.took(inputs.decided(gate_id, approve, by, note), now)
        self.wake.set()
        self.journal.record(verdicts, now)
        await self.interventions.carry_out(verdicts, None)
        self.interventions.after_gates()
        self.journal.publish()
        return verdicts

    def grant(self, note: str | None) -> Verdict:
        now = self.clock()
        verdict = self.health.grant_authority(now, task=self.spec.task, note=note)
        self.journal.took(inputs.granted(self.spec.task, note), now)
        self.journal.record([verdict], now)
        self.writer.inject(verdict.message or "", "authority", "operator")
        self.journal.publish()
        return verdict

    def reset(self, counter: str | None) -> None:
        self.health.reset_counters(counter)
        self.journal.took(inputs.reset(counter), self.clock())
        self.journal.publish()

    def inject(self, text: str) -> bool:
        """Send operator text to the agent; False when this adapter cannot receive text."""
        if not self.agent.adapter.can_inject:
            return False
        self.writer.inject(text, "operator", "operator")
        return True

    def pause(self) -> None:
        process = self.process
        if process.state == SessionState.RUNNING:
            process.hold()
            process.operator_paused = True
            self.journal.publish()

    def resume(self) -> None:
        """Undo an operator's pause; a session that waits on a gate stays stopped until it is decided."""
        process = self.process
        if not process.operator_paused:
            return
        process.operator_paused = False
        if not (self.health.state == GATED and not self.agent.adapter.can_veto):
            process.release()
        self.journal.publish()

    def kill_soon(self, note: str | None = None) -> bool:
        """An operator's kill carried out by the session's ticker, woken for it, when the ticker waits for
        nothing else: no task of its own. False: the caller runs `kill` in a task."""
        process = self.process
        if process.process is None or self.tasks.finishing or not self.ticker.idle or process.stopping or process.final:
            return False
        self.ticker.ask_kill(note)
        return True
