"""A live session's clock: what comes due with time (the engine's deadlines) or is left for a task to do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ...supervisor.health import GATED, SessionHealth
from .interventions import Interventions
from .journal import Journal
from .process import AgentProcess
from .sampling import Sampler
from .tasks import Tasks, Wake
from .writer import InputWriter

IDLE_TICK: Final = 60.0  # the ticker sleeps until the engine's next deadline, or this long at most


class Ticker:
    """Sleeps until the engine's next deadline (runtime, stall, gate expiry) or a wake-up, then carries out what
    came due: an operator's kill, a deaf agent's stop, verdicts on resources, the engine's tick, and the stdin
    writer a read callback could not start."""

    def __init__(self, health: SessionHealth, journal: Journal, process: AgentProcess, writer: InputWriter,
                 sampler: Sampler, interventions: Interventions, tasks: Tasks, wake: Wake,
                 clock: Callable[[], float]) -> None:
        self.health = health
        self.journal = journal
        self.process = process
        self.writer = writer
        self.sampler = sampler
        self.interventions = interventions
        self.tasks = tasks
        self.wake = wake
        self.clock = clock
        self.idle = False  # it waits for nothing but its wake-up (or it returned)
        self.kill_asked: tuple[str | None] | None = None  # (note,) of an operator's kill for it to carry out

    def ask_kill(self, note: str | None) -> None:
        """An operator's kill, carried out by the ticker (no task of its own), woken for it."""
        self.kill_asked = (note,)
        self.wake.set()

    async def run(self) -> None:
        while True:
            deadline = self.health.next_deadline()
            now = self.clock()
            delay = IDLE_TICK if deadline is None else min(IDLE_TICK, max(0.0, deadline - now))
            self.idle = True
            await self.wake.wait(delay + 0.001)
            self.idle = False
            if self.kill_asked is not None:  # (even at the end: the operator's kill is recorded as asked)
                await self.kill_if_asked()
                if self.process.containment.emptied:  # nothing of the session runs, nor can again: nothing to tick
                    self.idle = True  # (returned)
                    return
            if self.tasks.finishing:  # the agent and its output are gone
                return
            self.wake.clear()
            await self._due()

    async def kill_if_asked(self) -> None:
        if self.kill_asked is not None:
            (note,), self.kill_asked = self.kill_asked, None
            await self.interventions.kill(note)

    async def _due(self) -> None:
        if self.writer.waiting:  # queued by a read callback
            self.writer.start()
        if self.writer.deaf is not None and not self.process.stopping:
            await self.interventions.stop_deaf(self.writer.deaf)
        sampled = self.sampler.take_verdicts()
        if sampled:
            await self.interventions.carry_out(sampled, None)
        had_gates = self.health.state == GATED
        now = self.clock()
        verdicts = self.health.tick(now)
        if verdicts:
            self.journal.record(verdicts, now)
            await self.interventions.carry_out(verdicts, None)
        if verdicts or had_gates:
            self.interventions.after_gates()  # an expiry policy may have decided a gate
            self.journal.publish()
