"""Verdicts: what the supervisor decides, and the closed set of termination reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class SessionState(StrEnum):
    """Where a session is: the one set of states every session kind, the store and the console use."""

    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"  # by the operator (a shown state; the session itself is still RUNNING)
    GATED = "gated"  # waiting on a human (shown, as PAUSED)
    STOPPING = "stopping"
    EXITED = "exited"
    TERMINATED = "terminated"
    LOST = "lost"  # its daemon went away while it ran (marked by the next one)


FINAL_STATES = (SessionState.EXITED, SessionState.TERMINATED, SessionState.LOST)  # a session here has ended


class Action(StrEnum):
    ALLOW = "allow"
    NUDGE = "nudge"
    BLOCK = "block"
    GATE = "gate"
    TERMINATE = "terminate"
    FORCE_NEXT = "force_next"
    UNBLOCK_AUTHORITY = "unblock_authority"
    ESCALATE = "escalate"
    SPILL = "spill"


class Termination(StrEnum):
    """Why a session ended; each has its own process exit code."""

    MAX_RUNTIME = "max_runtime"
    REPETITION_LOOP = "repetition_loop"
    VALIDATION_FAILURE = "validation_failure"
    CONSECUTIVE_FAILURES = "consecutive_failures"
    MAX_ITERATIONS = "max_iterations"
    BUDGET = "budget"
    LOOP_GATE_DENIED = "loop_gate_denied"
    OPERATOR = "operator"
    EXITED = "exited"
    CRASHED = "crashed"
    LOST = "lost"
    DAEMON_STOPPED = "daemon_stopped"  # stop-daemon, or a signal to the daemon: not an operator's kill

    @property
    def exit_code(self) -> int:
        """The exit code `loopwarden run` returns for this reason (exited passes the agent's own)."""
        return EXIT_CODES[self]


EXIT_CODES: dict[Termination, int] = {
    Termination.EXITED: 0,
    Termination.MAX_RUNTIME: 10,
    Termination.REPETITION_LOOP: 11,
    Termination.VALIDATION_FAILURE: 12,
    Termination.CONSECUTIVE_FAILURES: 13,
    Termination.MAX_ITERATIONS: 14,
    Termination.BUDGET: 15,
    Termination.LOOP_GATE_DENIED: 16,
    Termination.OPERATOR: 17,
    Termination.CRASHED: 18,
    Termination.LOST: 19,
    Termination.DAEMON_STOPPED: 20,
}


@dataclass(slots=True)
class Verdict:
    """One decision. `reason` is for the operator; `message` is the text sent to the agent."""

    action: Action
    rule: str
    reason: str
    message: str | None = None
    seq: int = 0
    termination: Termination | None = None
    target: str | None = None
    gate_id: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    ask: str | None = None  # an ambiguous case a second opinion may overrule: its question kind (supervisor/opinion.py)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seq": self.seq,
            "action": str(self.action),
            "rule": self.rule,
            "reason": self.reason,
        }
        if self.message is not None:
            out["message"] = self.message
        if self.termination is not None:
            out["termination"] = str(self.termination)
        if self.target is not None:
            out["target"] = self.target
        if self.gate_id is not None:
            out["gate_id"] = self.gate_id
        if self.evidence:
            out["evidence"] = self.evidence
        if self.ask is not None:
            out["ask"] = self.ask
        return out


def terminate(rule: str, reason: Termination, text: str, **evidence: Any) -> Verdict:
    """A terminate verdict whose message tells the agent why it is being stopped."""
    return Verdict(Action.TERMINATE, rule, text, message=text, termination=reason, evidence=evidence)


def final_exit_code(snapshot: dict[str, Any]) -> int:
    """The exit code `run` returns: the termination reason's, or the agent's own."""
    if snapshot.get("termination"):
        return Termination(snapshot["termination"]).exit_code
    code: int | None = snapshot.get("exit_code")
    if code is None:
        return 0
    return code if code >= 0 else 128 + -code

