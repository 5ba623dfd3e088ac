"""Consecutive failures (seed 003): 5 failures in a row -> terminate(consecutive_failures).

A result is a failure when is_error is true or exit_code is present and not 0 (protocol).
"""

from __future__ import annotations

from tests.engine.helpers import Action, Termination, call, config, of, ok, result, run, summary

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


def failing(i, **kw):
    """A failing call with its own arguments and its own error (no repetition, no same error)."""
    return [call("make", {"target": WORDS[i]}),
            result(f"make: *** No rule to make target '{WORDS[i]}'", tool="make", **kw)]


def test_five_consecutive_failures_terminate_at_the_fifth():
    events = []
    for i in range(5):
        events += failing(i, is_error=True)
    verdicts = run(events)
    assert summary(verdicts) == [("terminate", "consecutive_failures", 10)]
    v = verdicts[0]
    assert v.termination == Termination.CONSECUTIVE_FAILURES
    assert "5" in v.message and "consecutive failures" in v.message
    assert "No rule to make target 'echo'" in v.message   # the last failure


def test_near_miss_four_failures():
    events = []
    for i in range(4):
        events += failing(i, is_error=True)
    assert run(events) == []


def test_non_zero_exit_code_is_a_failure_and_zero_is_not():
    events = []
    for i in range(5):
        events += failing(i, exit_code=2)
    assert summary(of(run(events), Action.TERMINATE)) == [("terminate", "consecutive_failures", 10)]
    events = []
    for i in range(6):
        events += failing(i, exit_code=0)
    assert run(events) == []


def test_a_success_resets_the_count():
    events = []
    for i in range(4):
        events += failing(i, is_error=True)
    events += [call("ls", {"path": "."}), ok("ls", "src")]
    for i in range(4, 8):
        events += failing(i, is_error=True)
    assert of(run(events), Action.TERMINATE) == []
    events += failing(8, is_error=True)
    assert summary(of(run(events), Action.TERMINATE)) == [("terminate", "consecutive_failures", 20)]


def test_configured_limit():
    cfg = config("failures.max_consecutive=3")
    events = []
    for i in range(3):
        events += failing(i, is_error=True)
    assert summary(run(events, cfg)) == [("terminate", "consecutive_failures", 6)]
    assert run(events[:4], cfg) == []
