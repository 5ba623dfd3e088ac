"""Gates: gate_request -> gate; decide() on unknown/decided gates raises GateError; deny ->
terminate(loop_gate_denied); approve with a note -> a nudge carrying the note; a human decision
resets the counters (seed 002: "Clear state on task completion or human intervention")."""

from __future__ import annotations

import pytest

from loopwarden.supervisor.gates import GateError
from tests.engine.helpers import (
    Action, Session, Termination, call, config, error, gate_request, ok, one, summary, verr,
)


def test_gate_request_opens_a_gate_with_the_agents_reason():
    s = Session()
    verdicts = s.feed(call("ls", {"path": "."}), ok("ls", "db"), gate_request("About to drop the legacy_users table"))
    assert summary(verdicts) == [("gate", "gate_request", 3)]
    gate = verdicts[0]
    assert gate.gate_id
    assert "About to drop the legacy_users table" in gate.reason
    pending = s.health.pending_gates()
    assert [g.id for g in pending] == [gate.gate_id]


def test_near_miss_no_gate_without_a_request():
    s = Session()
    assert s.feed(call("ls", {"path": "."}), ok("ls", "db")) == []
    assert s.health.pending_gates() == []


def test_deny_terminates_with_loop_gate_denied_and_then_everything_is_ignored():
    s = Session()
    gate = one(s.feed(gate_request("drop table?")), Action.GATE)
    verdicts = s.decide(gate.gate_id, False)
    assert [(v.action, v.termination) for v in verdicts] == [(Action.TERMINATE, Termination.LOOP_GATE_DENIED)]
    assert s.health.termination_reason == Termination.LOOP_GATE_DENIED
    assert s.feed(gate_request("again?"), verr(), verr(), verr()) == []


def test_approve_with_a_note_nudges_with_the_note():
    s = Session()
    gate = one(s.feed(gate_request("drop table?")), Action.GATE)
    verdicts = s.decide(gate.gate_id, True, note="Drop only the _bak copy, keep the live table.")
    nudge = one(verdicts, Action.NUDGE)
    assert "Drop only the _bak copy, keep the live table." in nudge.message
    assert s.health.pending_gates() == []
    assert s.health.termination_reason is None


def test_unknown_gate_raises():
    s = Session()
    with pytest.raises(GateError):
        s.decide("g999", True)


def test_already_decided_gate_raises():
    s = Session()
    gate = one(s.feed(gate_request("ok?")), Action.GATE)
    s.decide(gate.gate_id, True)
    with pytest.raises(GateError):
        s.decide(gate.gate_id, True)
    with pytest.raises(GateError):
        s.decide(gate.gate_id, False)
    assert s.health.termination_reason is None  # the rejected second decision changed nothing


def test_a_human_decision_resets_the_loop_counter():
    s = Session(config("failures.max_consecutive=100"))
    msg = "SyntaxError at line 42"
    s.feed(error(msg), error(msg), error(msg))              # loop count 2
    gate = one(s.feed(gate_request("may I refactor the parser?")), Action.GATE)
    s.decide(gate.gate_id, True)
    assert s.feed(error(msg), error(msg), error(msg)) == []  # would be count 5 without the reset


def test_a_human_decision_resets_the_identical_call_streak():
    s = Session()
    for _ in range(5):
        s.feed(call("sql", {"q": "SELECT 1"}), ok("sql", "1"))
    gate = one(s.feed(gate_request("stuck on the query; help?")), Action.GATE)
    s.decide(gate.gate_id, True)
    assert [v.action for v in s.feed(call("sql", {"q": "SELECT 1"}))] == []


def test_waiting_for_a_human_is_not_a_stall() -> None:
    from loopwarden.supervisor.config import load_config
    from loopwarden.supervisor.events import GateRequest, ToolCall
    from loopwarden.supervisor.health import SessionHealth

    health = SessionHealth(load_config(env={}, sets=["limits.stall_timeout=30s"]), started_at=0.0)
    [gate] = health.observe(GateRequest(seq=1, reason="drop the table?"), 1.0)
    assert health.tick(200.0) == []  # a human takes their time: no stall while gated
    health.decide(gate.gate_id, True, 200.0)  # type: ignore[arg-type]
    assert health.tick(210.0) == []  # the clock restarts at the decision
    [stall] = health.tick(231.0)
    assert stall.rule == "stall" and "31000ms" in stall.message  # type: ignore[operator]
    assert health.observe(ToolCall(seq=2, tool="x", args={}), 232.0) == []


def test_every_text_that_asks_a_human_ends_with_the_sentence_the_console_drops_once_decided() -> None:
    from loopwarden.supervisor import messages

    asking = [messages.loop_gate("t1", 3, "3 failed iterations", "boom"), messages.polling_gate("bash", 6, True),
              messages.condensation_gate(3), messages.reread_gate("a.py", 5), messages.chanting_gate("same", 4),
              messages.reflections_gate(4, 3, "t1", "pytest failed")]
    assert all(text.endswith(" " + messages.AWAITING_HUMAN) for text in asking)
