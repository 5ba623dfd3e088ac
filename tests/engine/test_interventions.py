"""SessionHealth.interventions(): what was done to the agent, counted by kind as verdicts are given."""

from __future__ import annotations

from tests.engine.helpers import Action, Session, call, gate_request, ok, one

SQL = {"query": "SELECT 1"}


def test_each_verdict_short_of_terminate_is_counted_by_its_kind():
    s = Session()
    for _ in range(5):
        s.feed(call("sql", dict(SQL)), ok("sql", "1 row"))
    s.feed(*(call("sql", dict(SQL)) for _ in range(4)))  # three blocked repeats, then the end
    assert s.health.interventions() == {"nudge": 1, "block": 3}
    assert s.health.state == "terminated"  # the terminate itself is the ending, not an intervention


def test_a_session_left_alone_has_no_interventions():
    s = Session()
    s.feed(call("read", {"path": "a"}), ok("read"), call("read", {"path": "b"}), ok("read"))
    assert s.health.interventions() == {}


def test_the_operators_own_decisions_are_not_counted_as_interventions():
    s = Session()
    gate = one(s.feed(gate_request("drop table?")), Action.GATE)
    s.decide(gate.gate_id, True, note="Drop only the _bak copy.")  # approve with guidance: a nudge by the operator
    s.health.grant_authority(s.now)
    assert s.health.interventions() == {"gate": 1}  # loopwarden gated; the nudge and the grant were the human's
