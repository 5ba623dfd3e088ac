"""Rewinding a live agent's conversation: asked by an operator, or by recovery.on_loop instead of an end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...sessions.base import Capability
from ...supervisor import messages
from ...supervisor.health import SessionHealth
from ...supervisor.verdicts import Action, Termination, Verdict
from .. import inputs
from .agent import Agent
from .interventions import Interventions
from .journal import Journal
from .tasks import Wake
from .writer import InputWriter


class Recovery:
    """Drops the last turns of the agent's conversation (an adapter with REWIND) and retries them with guidance
    built from the loop's evidence; counts the rewinds, for recovery.max_rewinds."""

    def __init__(self, agent: Agent, health: SessionHealth, journal: Journal, writer: InputWriter,
                 interventions: Interventions, wake: Wake, clock: Callable[[], float]) -> None:
        self.agent = agent
        self.health = health
        self.journal = journal
        self.writer = writer
        self.interventions = interventions
        self.wake = wake
        self.clock = clock
        self.rewinds = 0  # conversations rewound (recovery.on_loop and operators)
        # a rewind instead of an end, as the engine took it: logged after the event that ended the loop (Judge)
        self.withdrawn: tuple[dict[str, Any], float] | None = None

    def recover(self, verdicts: list[Verdict]) -> list[Verdict]:
        """recovery.on_loop=rewind: a loop that would end a session that can rewind rewinds it instead, at
        most recovery.max_rewinds times; the terminate verdict gives way to the rewind's."""
        end = verdicts[-1]
        recovery = self.health.config.recovery
        if recovery.on_loop != "rewind" or end.termination != Termination.REPETITION_LOOP:
            return verdicts
        can = Capability.REWIND in self.agent.capabilities
        if not can or self.rewinds >= recovery.max_rewinds:
            n = self.rewinds
            why = (f"after {n} rewind{'s' if n != 1 else ''} (recovery.max_rewinds)"
                   if can else f"the {self.agent.adapter.name} adapter cannot rewind")
            self.journal.report(f"recovery.on_loop=rewind: the loop ends the session: {why}")
            return verdicts
        try:
            rewound = self.rewind(1, None, by="policy", instead_of=end)
        except ValueError as exc:
            self.journal.report(f"recovery.on_loop=rewind could not rewind ({exc}); the session ends", error=True)
            return verdicts
        self.health.withdraw_termination()
        return [*verdicts[:-1], rewound]

    def log_withdrawn(self) -> None:
        """Log the rewind that took the place of an end, once the event that ended the loop is recorded."""
        if self.withdrawn is not None:
            given, now = self.withdrawn
            self.withdrawn = None
            self.journal.took(given, now)

    def rewind(self, turns: int, note: str | None, *, by: str = "operator",
               instead_of: Verdict | None = None) -> Verdict:
        """Drop the last `turns` turns from the agent's conversation and retry with guidance built from the
        loop's evidence (and `note`). Gates are settled, held calls dropped, loop counters reset. Returns the
        rewind's verdict (recorded; its guidance is sent by the adapter, not injected again). Raises ValueError
        (one line) when the adapter cannot rewind now."""
        evidence = self.journal.last_intervention
        shown = (evidence.message or evidence.reason) if evidence else (instead_of.reason if instead_of else None)
        guidance = messages.rewind_guidance(turns, shown, note)
        line = self.agent.adapter.rewind_line(turns, guidance)
        self.rewinds += 1
        self.writer.send(line)
        self.interventions.drop_held()
        now = self.clock()
        for gate in self.health.pending_gates():
            self.journal.record(self.health.decide(gate.id, True, now, by=by, note=None))
        self.interventions.after_gates()
        self.health.reset_counters()
        given = inputs.rewound(by, withdraw=instead_of is not None)
        if instead_of is None:
            self.journal.took(given, now)
        else:  # the end it takes the place of is withdrawn next (recover)
            self.withdrawn = given, now
        why = f"instead of terminating ({instead_of.reason})" if instead_of else f"by {by}"
        verdict = Verdict(Action.NUDGE, "rewind", f"rewound {turns} turn{'s' if turns != 1 else ''} {why}",
                          seq=instead_of.seq if instead_of else 0,
                          evidence={"turns": turns, "by": by, "rewinds": self.rewinds, "guidance": guidance})
        if instead_of is None:
            self.journal.record([verdict])
        self.wake.set()
        self.journal.publish()
        return verdict
