"""user_message vs system_nudge.

Spec: "A user_message is a human turn: it resets these windows and the consecutive-failure
count (unless reset_on_user_message is off); a system_nudge never resets anything."
"""

from __future__ import annotations

import pytest

from tests.engine.helpers import Action, call, config, fail, of, ok, run, summary, system_nudge, user

SQL = {"query": "SELECT 1"}
NO_RESET = config("repetition.reset_on_user_message=false")


def identical(n):
    out = []
    for _ in range(n):
        out += [call("sql_query", dict(SQL)), ok("sql_query", "1 row")]
    return out


def failures(n, start=0):
    """n failing calls with distinct arguments and distinct errors (no repetition, no same error)."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    out = []
    for i in range(start, start + n):
        out += [call("bash", {"command": f"make {words[i]}"}),
                fail("bash", f"make: *** No rule to make target '{words[i]}'")]
    return out


# ---- identical-call streak ----------------------------------------------
def test_user_message_resets_the_identical_call_streak():
    events = identical(5) + [user()] + identical(5)
    assert of(run(events), Action.BLOCK) == []
    events = identical(5) + [user()] + identical(5) + [call("sql_query", dict(SQL))]
    assert summary(of(run(events), Action.BLOCK)) == [("block", "repetition", 22)]


def test_with_reset_off_a_user_message_does_not_reset_the_streak():
    events = identical(5) + [user(), call("sql_query", dict(SQL))]
    assert summary(of(run(events, NO_RESET), Action.BLOCK)) == [("block", "repetition", 12)]


def test_system_nudge_does_not_reset_the_streak():
    events = identical(5) + [system_nudge(), call("sql_query", dict(SQL))]
    assert summary(of(run(events), Action.BLOCK)) == [("block", "repetition", 12)]


# ---- consecutive failures ------------------------------------------------
def test_user_message_resets_the_consecutive_failure_count():
    assert of(run(failures(4) + [user()] + failures(4, 4)), Action.TERMINATE) == []
    verdicts = run(failures(4) + [user()] + failures(5, 4))
    assert summary(of(verdicts, Action.TERMINATE)) == [("terminate", "consecutive_failures", 19)]


def test_with_reset_off_a_user_message_does_not_reset_the_failure_count():
    verdicts = run(failures(4) + [user()] + failures(1, 4), NO_RESET)
    assert summary(of(verdicts, Action.TERMINATE)) == [("terminate", "consecutive_failures", 11)]


def test_system_nudge_does_not_reset_the_failure_count():
    verdicts = run(failures(4) + [system_nudge()] + failures(1, 4))
    assert summary(of(verdicts, Action.TERMINATE)) == [("terminate", "consecutive_failures", 11)]


# ---- same-error window -------------------------------------------------------
def same_errors(n):
    out = []
    for i in range(n):
        out += [call("http", {"url": f"/v1/item/{i}"}), fail("http", "Error: 404 Not Found")]
    return out


@pytest.mark.parametrize("between,cfg,blocked", [
    (user(), None, False),
    (user(), NO_RESET, True),
    (system_nudge(), None, True),
], ids=["user", "user-reset-off", "system-nudge"])
def test_same_error_window(between, cfg, blocked):
    events = same_errors(3) + [between, call("http", {"url": "/v1/other"})]
    verdicts = run(events, cfg)
    assert summary(verdicts) == ([("block", "same_error", 8)] if blocked else [])
