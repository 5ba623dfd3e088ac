"""Chanting (Gemini CLI's content loop): one message that repeats the same 50-character passage 10
times close together. The first is nudged, a second one opens a gate; code, lists and tables are
left out, as in Gemini CLI."""

from __future__ import annotations

from tests.engine.helpers import Action, call, config, msg, ok, one, run, summary, user

CHANT = "I will not output any text until the build passes. "


def test_a_chanting_message_is_nudged_then_a_second_is_gated():
    verdicts = run([msg("Let me think. " + CHANT * 12), call("Bash", {"command": "ls"}), ok("Bash", "a"),
                    msg(CHANT * 11)])
    assert summary(verdicts) == [("nudge", "chanting", 1), ("gate", "chanting", 4)]
    nudge = verdicts[0]
    assert nudge.evidence["count"] >= 10 and nudge.evidence["passage"] in CHANT * 2
    assert "repeats the same passage" in nudge.message


def test_exactly_ten_occurrences_fire_and_nine_do_not():
    ten = "abcdefghij" * 14  # a 10-char period: a 50-char chunk occurs 10 times in 140 characters
    assert one(run([msg("Note: " + "A looping reply. " * 3 + CHANT * 10)]), Action.NUDGE, "chanting")
    assert run([msg(CHANT * 2 + "The end.")]) == []
    assert one(run([msg(ten)]), Action.NUDGE, "chanting").evidence["count"] == 10
    assert run([msg(ten[:139])]) == []


def test_near_misses_lists_code_tables_and_distant_repeats():
    items = "\n".join(f"The value of configuration option number {i} is now {i * 7}." for i in range(30))
    assert run([msg(items)]) == []  # a shared prefix is not a loop (distinct periods)
    bullets = "\n".join(f"- {CHANT}" for _ in range(12))
    assert run([msg(bullets)]) == []
    code = "```python\n" + "x = compute_the_value(a, b, c)  # noqa, repeated\n" * 20 + "```\n"
    assert run([msg(code)]) == []
    table = "\n".join("| a long cell repeated in a table | another long cell |" for _ in range(15))
    assert run([msg(table)]) == []
    filler = " ".join(f"word{i}" for i in range(80))
    assert run([msg((CHANT + filler + " ") * 10)]) == []  # repeats too far apart


def test_a_human_turn_resets_the_strikes_and_the_rule_can_be_switched_off():
    verdicts = run([msg(CHANT * 12), user(), msg(CHANT * 12)])
    assert [v.action for v in verdicts] == [Action.NUDGE, Action.NUDGE]
    assert run([msg(CHANT * 30)], config("chanting.repeats=0")) == []
    assert one(run([msg(CHANT * 5)], config("chanting.repeats=4")), Action.NUDGE, "chanting")
