"""Validation failures (seed 003): consecutive count, reset on a valid step, terminate at the
limit (default 3). "A tool_call answered by a validation_error belongs to that failure and
does not reset the count." Lines loopwarden cannot parse count toward the same limit.
"""

from __future__ import annotations

from tests.engine.helpers import (
    Action, Termination, call, config, fail, invalid, msg, of, ok, run, summary, system_nudge, verr,
)


def test_three_consecutive_validation_failures_terminate():
    verdicts = run([verr("bad JSON 1"), verr("bad JSON 2"), verr("missing required field 'path'")])
    term = of(verdicts, Action.TERMINATE)
    assert summary(term) == [("terminate", "validation", 3)]
    assert term[0].termination == Termination.VALIDATION_FAILURE
    assert "3" in term[0].message and "validation" in term[0].message.lower()
    assert "missing required field 'path'" in term[0].message   # the evidence: the last failure


def test_near_miss_two_failures_inform_the_agent_but_do_not_terminate():
    verdicts = run([verr("arguments are not valid JSON"), verr("arguments are not valid JSON")])
    assert of(verdicts, Action.TERMINATE) == []
    # seed 003: "Inform Claude about the parsing error and continue"
    assert [v.action for v in verdicts] == [Action.NUDGE, Action.NUDGE]
    assert all("arguments are not valid JSON" in v.message for v in verdicts)


def test_a_valid_step_resets_the_count():
    events = [verr(), verr(), msg("Retrying with valid JSON."), verr(), verr()]
    assert of(run(events), Action.TERMINATE) == []
    events = [verr(), verr(), call("ls", {"path": "."}), ok("ls", "src"), verr(), verr()]
    assert of(run(events), Action.TERMINATE) == []


def test_a_failed_tool_result_is_still_a_valid_step():
    events = [verr(), verr(), call("ls", {"path": "/nope"}), fail("ls", "No such file"), verr(), verr()]
    assert of(run(events), Action.TERMINATE) == []


def test_a_tool_call_answered_by_a_validation_error_does_not_reset_the_count():
    events = [verr(), verr(), call("write_file", {"path": "a.py"}), verr("missing required field 'content'")]
    verdicts = run(events)
    assert summary(of(verdicts, Action.TERMINATE)) == [("terminate", "validation", 4)]


def test_unparseable_lines_count_toward_the_same_limit():
    verdicts = run([verr(), invalid("not valid JSON (truncated)"), verr()])
    assert summary(of(verdicts, Action.TERMINATE)) == [("terminate", "validation", 3)]


def test_validation_failures_are_not_execution_failures():
    # 4 tool failures and then 2 validation failures: neither limit (5 failures, 3 validation) is hit
    events = []
    for w in ("alpha", "bravo", "charlie", "delta"):
        events += [call("make", {"target": w}), fail("make", f"No rule to make target '{w}'")]
    events += [verr(), verr()]
    assert of(run(events), Action.TERMINATE) == []


def test_configured_limit():
    cfg = config("validation.max_consecutive=5")
    assert of(run([verr() for _ in range(4)], cfg), Action.TERMINATE) == []
    verdicts = run([verr() for _ in range(5)], cfg)
    assert summary(of(verdicts, Action.TERMINATE)) == [("terminate", "validation", 5)]


def test_a_system_nudge_is_not_a_valid_step():
    # spec: "a system_nudge never resets anything"
    verdicts = run([verr(), verr(), system_nudge("Reminder: answer with a tool call."), verr()])
    assert summary(of(verdicts, Action.TERMINATE)) == [("terminate", "validation", 4)]
