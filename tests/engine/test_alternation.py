"""Alternation: two calls A,B,A,B with identical results over the window (default 6 calls).

Spec: Repetition, "Also catch: ... Two calls alternating A,B,A,B with identical results over
the window" (OpenHands' period-2 pattern: last 6 actions and 6 observations).
"""

from __future__ import annotations


from tests.engine.helpers import Action, call, config, condensation, ok, one, run, summary, system_nudge, user

A = ("read_file", {"path": "src/app.py"})
B = ("bash", {"command": "pytest -q tests/test_app.py"})


def a(out="def main(): ..."):
    return [call(*A), ok("read_file", out)]


def b(out="1 failed, 4 passed"):
    return [call(*B), ok("bash", out)]


def test_a_b_a_b_a_b_with_identical_results_is_nudged_at_the_sixth_result():
    verdicts = run(a() + b() + a() + b() + a() + b())
    nudge = one(verdicts, Action.NUDGE)
    assert summary(verdicts) == [("nudge", "alternation", 12)]
    assert "read_file" in nudge.message and "bash" in nudge.message
    assert "alternat" in nudge.message.lower()
    assert "same result" in nudge.message.lower()
    assert "different approach" in nudge.message.lower()


def test_near_miss_five_calls_do_not_fire():
    assert run(a() + b() + a() + b() + a()) == []


def test_changing_results_are_not_a_loop():
    events = []
    for i in range(4):
        events += a() + b(f"{4 - i} failed, {i + 1} passed")  # the test run improves each time
    assert run(events) == []


def changing_cycles(n):
    return [e for i in range(n) for e in a(f"def main(): ...  # line {i}") + b(f"{i} failed, {i + 1} passed")]


def test_alternating_with_changing_results_is_nudged_once_at_the_polling_ceiling():
    from loopwarden.supervisor.opinion import ALTERNATION

    verdicts = run(changing_cycles(14))
    assert summary(verdicts) == [("nudge", "alternation", 39)]  # the 10th cycle's B call (10 by default)
    nudge = verdicts[0]
    assert nudge.ask == ALTERNATION and nudge.evidence["cycles"] == 10 and nudge.evidence["changed"] == "output"
    assert "read_file" in nudge.message and "bash" in nudge.message and "keeps changing" in nudge.message


def test_near_miss_nine_changing_cycles_and_the_ceiling_off():
    assert run(changing_cycles(9)) == []
    assert run(changing_cycles(14), config("repetition.progress_nudge_after=0")) == []


def test_one_changing_result_in_the_window_breaks_it():
    assert run(a() + b() + a("def main(): return 1") + b() + a() + b()) == []


def test_a_third_call_breaks_the_pattern():
    events = a() + b() + a() + [call("ls", {"path": "."}), ok("ls", "src")] + a() + b()
    assert run(events) == []


def test_window_is_configurable():
    cfg = config("repetition.alternation_window=4")
    assert summary(run(a() + b() + a() + b(), cfg)) == [("nudge", "alternation", 8)]
    assert run(a() + b() + a(), cfg) == []


def test_user_message_resets_the_window():
    assert run(a() + b() + a() + b() + a() + [user()] + b()) == []


def test_system_nudge_and_condensation_do_not_reset_the_window():
    verdicts = run(a() + b() + a() + [system_nudge()] + b() + [condensation()] + a() + b())
    assert summary(verdicts) == [("nudge", "alternation", 14)]


def test_the_nudge_names_the_arguments_when_both_calls_use_the_same_tool():
    # spec: "Every message sent to an agent says what happened, with the evidence (tool,
    # arguments, counts, last outcome), and what to do instead"
    def read(path, out):
        return [call("read_file", {"path": path}), ok("read_file", out)]
    events = []
    for _ in range(3):
        events += read("src/config.py", "DEBUG = False") + read("src/settings.py", "from config import *")
    nudge = one(run(events), Action.NUDGE, "alternation")
    assert nudge.seq == 12
    assert "src/config.py" in nudge.message and "src/settings.py" in nudge.message
