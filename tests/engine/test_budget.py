"""Budget: tokens (input + output) and cost summed from `usage` increments -> terminate(budget);
0 = off (the default for both)."""

from __future__ import annotations

from tests.engine.helpers import Action, Termination, config, of, run, summary, usage


def terminations(verdicts):
    return of(verdicts, Action.TERMINATE)


def test_token_budget_exhausted_terminates():
    cfg = config("limits.max_tokens=1000")
    verdicts = run([usage(400, 100), usage(300, 150), usage(40, 20)], cfg)   # 500, 950, 1010
    term = terminations(verdicts)
    assert summary(term) == [("terminate", "budget", 3)]
    assert term[0].termination == Termination.BUDGET
    assert "budget" in term[0].message and "token" in term[0].message
    assert "1,000" in term[0].message or "1000" in term[0].message


def test_near_miss_token_budget_not_reached():
    cfg = config("limits.max_tokens=1000")
    assert terminations(run([usage(400, 100), usage(300, 150), usage(40, 9)], cfg)) == []   # 999


def test_cost_budget_exhausted_terminates():
    cfg = config("limits.max_cost_usd=1.50")
    verdicts = run([usage(10, 10, cost=0.75), usage(10, 10, cost=0.5), usage(10, 10), usage(10, 10, cost=0.3)], cfg)
    term = terminations(verdicts)
    assert summary(term) == [("terminate", "budget", 4)]
    assert term[0].termination == Termination.BUDGET
    assert "cost" in term[0].message and "$" in term[0].message


def test_near_miss_cost_budget_not_reached():
    cfg = config("limits.max_cost_usd=1.50")
    assert terminations(run([usage(10, 10, cost=0.75), usage(10, 10, cost=0.74)], cfg)) == []


def test_zero_means_off():
    verdicts = run([usage(10**9, 10**9, cost=10_000.0) for _ in range(3)])
    assert verdicts == []
    cfg = config("limits.max_tokens=0", "limits.max_cost_usd=0")
    assert run([usage(10**9, 10**9, cost=10_000.0)], cfg) == []
