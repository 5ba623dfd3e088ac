"""Condensation loop (OpenHands `context_window_error`): 10 condensations in a row with no work
between them open a gate; work between them, or a human turn, starts the count over."""

from __future__ import annotations

from tests.engine.helpers import Action, call, condensation, config, msg, ok, one, run, summary, user


def test_ten_condensations_in_a_row_open_a_gate():
    verdicts = run([call("Bash", {"command": "ls"}), ok("Bash", "a")] + [condensation() for _ in range(10)])
    gate = one(verdicts, Action.GATE, "condensation")
    assert summary(verdicts) == [("gate", "condensation", 12)]
    assert gate.evidence["count"] == 10 and gate.evidence["first_seq"] == 3
    assert "condensed 10 times in a row" in gate.message and "frees no room" in gate.message


def test_near_miss_nine_in_a_row():
    assert run([condensation() for _ in range(9)]) == []


def test_near_miss_ten_separated_by_work():
    events = []
    for i in range(12):
        work = msg(f"step {i}") if i % 2 else call("Read", {"file_path": f"f{i}"})
        events += [condensation(), work]
    assert run(events) == []


def test_a_human_turn_starts_the_count_over_and_the_limit_is_a_key():
    assert run([condensation() for _ in range(5)] + [user()] + [condensation() for _ in range(5)]) == []
    assert summary(run([condensation() for _ in range(3)], config("condensation.max_in_a_row=3"))) == [
        ("gate", "condensation", 3)]
    assert run([condensation() for _ in range(30)], config("condensation.max_in_a_row=0")) == []
