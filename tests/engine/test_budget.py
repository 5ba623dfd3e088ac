"""Budget: tokens (input + output) and cost summed from `usage` increments; reached, the next call waits behind a
gate (limits.budget_action=pause, the default) or the session ends (terminate(budget)); 0 = off (the default)."""

from __future__ import annotations

from loopwarden.supervisor.config import Config
from tests.engine.helpers import Action, Session, Termination, call, config, of, one, ok, run, summary, usage


def terminations(verdicts):
    return of(verdicts, Action.TERMINATE)


def test_token_budget_exhausted_terminates():
    cfg = config("limits.max_tokens=1000", "limits.budget_action=terminate")
    verdicts = run([usage(400, 100), usage(300, 150), usage(40, 20)], cfg)   # 500, 950, 1010
    term = terminations(verdicts)
    assert summary(term) == [("terminate", "budget", 3)]
    assert term[0].termination == Termination.BUDGET
    assert "budget" in term[0].message and "token" in term[0].message
    assert "1,000" in term[0].message or "1000" in term[0].message


def test_near_miss_token_budget_not_reached():
    cfg = config("limits.max_tokens=1000", "limits.budget_action=terminate")
    assert terminations(run([usage(400, 100), usage(300, 150), usage(40, 9)], cfg)) == []   # 999


def test_cost_budget_exhausted_terminates():
    cfg = config("limits.max_cost_usd=1.50", "limits.budget_action=terminate")
    verdicts = run([usage(10, 10, cost=0.75), usage(10, 10, cost=0.5), usage(10, 10), usage(10, 10, cost=0.3)], cfg)
    term = terminations(verdicts)
    assert summary(term) == [("terminate", "budget", 4)]
    assert term[0].termination == Termination.BUDGET
    assert "cost" in term[0].message and "$" in term[0].message


def test_near_miss_cost_budget_not_reached():
    cfg = config("limits.max_cost_usd=1.50", "limits.budget_action=terminate")
    assert terminations(run([usage(10, 10, cost=0.75), usage(10, 10, cost=0.74)], cfg)) == []


def test_zero_means_off():
    verdicts = run([usage(10**9, 10**9, cost=10_000.0) for _ in range(3)])
    assert verdicts == []
    cfg = config("limits.max_tokens=0", "limits.max_cost_usd=0")
    assert run([usage(10**9, 10**9, cost=10_000.0)], cfg) == []


# ---- pause: the next call waits -------------------------------------------------------------------------------

def paused(*sets: str) -> Session:
    return Session(config("limits.max_cost_usd=1.00", *sets))


def test_a_cost_budget_reached_holds_the_next_call_behind_a_gate_without_ending_the_session():
    s = paused()
    assert of(s.feed(call("a"), ok("a"), usage(10, 10, cost=0.6)), Action.GATE) == []
    assert of(s.feed(call("b"), ok("b"), usage(10, 10, cost=0.5)), Action.GATE) == []  # $1.10: reached at usage,
    assert s.health.state == "running"  # nothing happens until a call asks to go through
    gate = one(s.feed(call("c", {"x": 1})), Action.GATE, "budget")
    assert s.health.state == "gated" and s.health.termination is None
    assert gate.gate_id == "g1" and gate.seq == 7
    assert gate.reason == ("the session's cost budget is reached: $1.10 used of $1.00 (limits.max_cost_usd); the "
                           "next call waits until it is raised, or one call is approved")
    assert gate.evidence == {"budget": "session", "what": "cost", "used": 1.1, "limit": 1.0, "tool": "c"}


def test_a_token_budget_names_its_key():
    s = Session(config("limits.max_tokens=100"))
    s.feed(usage(60, 50))
    gate = one(s.feed(call("a")), Action.GATE)
    assert "110 tokens used of 100 tokens (limits.max_tokens)" in gate.reason


def test_raising_the_budget_releases_the_gate_and_counts_go_on():
    s = paused()
    s.feed(usage(0, 0, cost=1.2), call("a"))
    assert [g.id for g in s.health.pending_gates()] == ["g1"]
    s.health.reconfigure(config("limits.max_cost_usd=1.10"))
    assert s.health.release_budget(s.now) == []  # still over $1.10: held
    assert s.health.state == "gated"
    s.health.reconfigure(config("limits.max_cost_usd=2"))
    released = s.health.release_budget(s.now)
    assert [(g.id, g.status, g.decided_by) for g in released] == [("g1", "approved", "budget")]
    assert s.health.state == "running"
    assert of(s.feed(call("b"), usage(0, 0, cost=0.5)), Action.GATE) == []  # $1.70 of $2
    s.feed(usage(0, 0, cost=0.4))
    assert one(s.feed(call("c")), Action.GATE).gate_id == "g2"  # $2.10 of $2


def test_an_approved_budget_gate_lets_one_call_through_and_the_next_waits_again():
    s = paused()
    s.feed(usage(0, 0, cost=1.0), call("a"))
    assert s.decide("g1", True) == [] and s.health.state == "running"
    gate = one(s.feed(call("b")), Action.GATE)
    assert gate.gate_id == "g2" and s.health.state == "gated"


def test_a_denied_budget_gate_ends_the_session_for_its_budget():
    s = paused()
    s.feed(usage(0, 0, cost=1.0), call("a"))
    end = one(s.decide("g1", False, note="enough"), Action.TERMINATE)
    assert end.termination == Termination.BUDGET
    assert end.reason == "session terminated: gate g1 (budget) denied by operator: enough"


def test_terminate_ends_the_session_at_the_usage_that_reaches_the_budget():
    s = paused("limits.budget_action=terminate")
    end = one(s.feed(call("a"), usage(0, 0, cost=1.0)), Action.TERMINATE)
    assert end.termination == Termination.BUDGET and end.seq == 2


def test_the_daemons_budgets_hold_the_next_call_and_clearing_them_releases_it():
    s = Session(Config())
    assert s.feed(call("a")) == []
    released = s.health.outside_budgets({"day": {"used": 5.02, "limit": 5.0}}, s.now)
    assert released == []
    gate = one(s.feed(call("b")), Action.GATE)
    assert gate.reason.startswith("the day budget of every session is reached: $5.02 spent today of $5.00 "
                                  "(budgets.day_usd)")
    assert gate.evidence["budget"] == "day"
    s.health.outside_budgets({"day": {"used": 5.02, "limit": 5.0},
                              "project": {"used": 2.0, "limit": 1.0, "project": "/w/app"}}, s.now)
    assert s.health.state == "gated"  # the day still holds it
    released = s.health.outside_budgets({"project": {"used": 2.0, "limit": 1.0, "project": "/w/app"}}, s.now)
    assert released == [] and s.health.state == "gated"  # the project budget holds it now
    released = s.health.outside_budgets({}, s.now)
    assert [g.id for g in released] == ["g1"] and s.health.state == "running"
    assert s.feed(call("c")) == []


def test_a_project_budget_names_its_project():
    s = Session(Config())
    s.health.outside_budgets({"project": {"used": 2.5, "limit": 2.0, "project": "/w/app"}}, 0.0)
    gate = one(s.feed(call("a")), Action.GATE)
    assert ("the day budget of project /w/app is reached: $2.50 spent today of $2.00 (budgets.project_usd)"
            in gate.reason)
    assert gate.evidence["project"] == "/w/app"


def test_the_daemons_budgets_terminate_at_the_next_call_with_terminate():
    s = Session(config("limits.budget_action=terminate"))
    s.health.outside_budgets({"day": {"used": 6.0, "limit": 5.0}}, 0.0)
    end = one(s.feed(call("a")), Action.TERMINATE)
    assert end.termination == Termination.BUDGET and "the day budget of every session is reached" in end.reason


def test_with_the_budget_rule_disabled_nothing_is_held():
    s = paused("rules.disabled=budget")
    assert s.feed(usage(0, 0, cost=3.0), call("a")) == [] and s.health.state == "running"


def test_without_a_budget_calls_do_not_pass_the_budget_guard():
    s = Session(Config())
    assert s.health._observers[type(call("a"))].count(s.health.budget._call) == 0
    s.health.outside_budgets({"day": {"used": 1, "limit": 1}}, 0.0)
    assert s.health.budget._call in s.health._observers[type(call("a"))]
