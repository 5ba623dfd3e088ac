"""What the daemon asks of every supervised session, whatever its kind (launched, attached, adopted).

The daemon decides by `capabilities` and these methods, never by class: an operation the session cannot carry
out is refused before it is audited as done, and the console greys out its key.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..sessions.base import Capability
from ..supervisor.config import Config
from ..supervisor.health import SessionHealth
from ..supervisor.verdicts import SessionState, Verdict
from .principal import Claim
from .procfs import ProcTable
from .session import SessionSpec
from .spill import Spiller

# what each operation needs, for the refusal and the console (an operation not listed needs nothing)
NEEDS = {"grant": Capability.INJECT, "inject": Capability.INJECT, "approve": Capability.HOLD,
         "deny": Capability.HOLD, "rewind": Capability.REWIND}


class NotCapable(Exception):
    """An operation a session cannot carry out (the daemon asks `refusal` first; this is the backstop)."""


class Supervised(Protocol):
    spec: SessionSpec
    config: Config
    state: SessionState
    health: SessionHealth
    stopping: bool
    ended_at: float | None
    deadline: float | None  # monotonic; set when the daemon stops: its waits end there

    @property
    def pid(self) -> int | None: ...
    @property
    def spiller(self) -> Spiller | None: ...
    @property
    def hook_key(self) -> str | None:
        """The agent's own session id, for a session attached by hooks."""

    @property
    def counts_loops(self) -> bool:
        """Whether its events move loop counters (an adopted process has no events)."""
    @property
    def final(self) -> bool: ...
    @property
    def capabilities(self) -> Capability: ...
    async def run(self) -> None: ...
    def snapshot(self) -> dict[str, Any]: ...
    def claims(self) -> list[Claim]: ...
    def observe(self, table: ProcTable) -> None: ...
    async def sample(self, children: dict[int, list[int]] | None = None) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    async def kill(self, note: str | None = None, *, daemon_stopping: bool = False) -> None:
        """An operator's kill, or (`daemon_stopping`) the end the daemon's own stop brings."""
    def kill_soon(self, note: str | None = None) -> bool:
        """An operator's kill carried out by the session's own ticker, woken for it; False: the caller runs
        `kill` in a task."""
    def kill_now(self) -> None: ...
    def reset(self, counter: str | None) -> None: ...
    def reconfigure(self, config: Config) -> None: ...
    def outside_budgets(self, reached: dict[str, dict[str, Any]]) -> None:
        """The daemon's budgets this session counts against that are reached now (scope -> used, limit,
        project): its engine holds the next call while any is (runtime/spending.py)."""
    async def decide(self, gate_id: str, approve: bool, by: str, note: str | None) -> list[Verdict]: ...
    def grant(self, note: str | None) -> Verdict: ...
    def inject(self, text: str) -> bool: ...
    def rewind(self, turns: int, note: str | None, *, by: str = "operator") -> Verdict:
        """Drop the last `turns` turns of the agent's conversation (a session with REWIND; ValueError otherwise)."""
    @property
    def restartable(self) -> bool:
        """Whether loopwarden started it, so that `restart` can start its task again (its spec and config)."""
    def failed(self) -> tuple[str | None, str | None, list[str], int | None]:
        """How it failed, for a restart's summary: how it ended, its last intervention, its last errors, its
        agent's exit code."""


def refusal(session: Supervised, op: str) -> str | None:
    """Why `session` cannot carry out `op` (one line), or None."""
    need = NEEDS.get(op)
    if op == "reset" and not session.counts_loops:
        return f"session {session.spec.id} ({session.spec.adapter}) has no loop counters to reset"
    if need is None or need in session.capabilities:
        return None
    what = {"grant": "be granted authority", "inject": "receive text",
            "approve": "hold a call for a gate", "deny": "hold a call for a gate",
            "rewind": "rewind its conversation (only Codex can; restart it instead)"}[op]
    return f"session {session.spec.id} ({session.spec.adapter}) cannot {what} (see 'loopwarden adapters')"
