"""Pending human decisions, with the evidence that opened them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class GateError(ValueError):
    """A decision on a gate that does not exist or was already decided."""


@dataclass(slots=True)
class Gate:
    id: str
    rule: str
    reason: str
    opened_at: float
    seq: int
    evidence: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"  # pending, approved, denied, expired
    decided_at: float | None = None
    decided_by: str | None = None
    note: str | None = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "rule": self.rule, "reason": self.reason, "opened_at": self.opened_at,
            "seq": self.seq, "evidence": self.evidence, "status": self.status,
            "decided_at": self.decided_at, "decided_by": self.decided_by, "note": self.note,
        }


class GateBook:
    """Gates of one session, oldest first; ids are unique within it ('g1', 'g2', ...)."""

    def __init__(self, prefix: str = "g") -> None:
        self.prefix = prefix
        self.gates: dict[str, Gate] = {}
        self._next = 1

    def open(self, rule: str, reason: str, evidence: dict[str, Any], seq: int, now: float) -> Gate:
        gate = Gate(f"{self.prefix}{self._next}", rule, reason, now, seq, evidence)
        self._next += 1
        self.gates[gate.id] = gate
        return gate

    def pending(self) -> list[Gate]:
        return [g for g in self.gates.values() if g.pending]

    def check(self, gate_id: str) -> Gate:
        """The pending gate `gate_id`; GateError when there is none or it was decided."""
        gate = self.gates.get(gate_id)
        if gate is None:
            raise GateError(f"no gate {gate_id!r}")
        if not gate.pending:
            raise GateError(f"gate {gate_id} was already {gate.status} by {gate.decided_by}")
        return gate

    def decide(self, gate_id: str, status: str, now: float, by: str, note: str | None = None) -> Gate:
        gate = self.check(gate_id)
        gate.status, gate.decided_at, gate.decided_by, gate.note = status, now, by, note
        return gate

    def expired(self, now: float, timeout: float) -> list[Gate]:
        """Pending gates older than `timeout` seconds (0 = never)."""
        if not timeout:
            return []
        return [g for g in self.gates.values() if g.pending and now - g.opened_at >= timeout]
