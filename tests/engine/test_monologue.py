"""Monologue: consecutive assistant messages with no tool call between them, firing at the
max_monologue-th (default 3); their texts may differ.
"""

from __future__ import annotations

from tests.engine.helpers import (
    Action, call, condensation, config, msg, of, ok, one, run, summary, system_nudge, user,
)


def test_third_consecutive_message_is_nudged_even_when_texts_differ():
    verdicts = run([msg("Let me think about the failing test."), msg("Perhaps the fixture is wrong."),
                    msg("Or maybe the import order matters.")])
    nudge = one(verdicts, Action.NUDGE)
    assert summary(verdicts) == [("nudge", "monologue", 3)]
    assert "3" in nudge.message
    assert "tool" in nudge.message.lower()


def test_near_miss_two_messages():
    assert run([msg("a"), msg("b")]) == []


def test_a_tool_call_between_resets_the_count():
    events = [msg("a"), msg("b"), call("ls", {"path": "."}), ok("ls", "src"), msg("c"), msg("d")]
    assert run(events) == []
    events = [msg("a"), msg("b"), call("ls", {"path": "."}), ok("ls", "src"), msg("c"), msg("d"), msg("e")]
    assert summary(run(events)) == [("nudge", "monologue", 7)]


def test_system_nudge_and_condensation_do_not_reset_the_count():
    verdicts = run([msg("a"), system_nudge(), msg("b"), condensation(), msg("c")])
    assert summary(verdicts) == [("nudge", "monologue", 5)]


def test_user_message_resets_the_count():
    assert run([msg("a"), msg("b"), user(), msg("c"), msg("d")]) == []


def test_configured_limit():
    cfg = config("repetition.max_monologue=5")
    assert of(run([msg(str(i)) for i in range(4)], cfg), Action.NUDGE) == []
    assert summary(run([msg(str(i)) for i in range(5)], cfg)) == [("nudge", "monologue", 5)]
