"""Repetition: identical calls (same tool + canonically equal args) -> nudge, block, terminate.

Spec: issue "Rules" (Repetition), seed 000 (nudge at 2 consecutive identical calls, its
message), seed 003 (block after 5 identical, i.e. the 6th is blocked; terminate with
repetition_loop after the blocks run out), max_blocks defaults to 3.
"""

from __future__ import annotations


from tests.engine.helpers import (
    Action, Session, Termination, call, config, fail, gate_request, of, ok, one, run, summary, verr,
)

SQL = {"query": "SELECT * FROM users WHERE id = 7"}


def pairs(n, tool="sql_query", args=SQL, output="3 rows", failed=False, **kw):
    """n x (identical call, its result)."""
    out = []
    for _ in range(n):
        out.append(call(tool, dict(args), **kw))
        out.append(fail(tool, output) if failed else ok(tool, output))
    return out


def test_full_escalation_nudge_at_2_block_6th_7th_8th_terminate_9th():
    # 5 identical calls with identical (successful, unchanging) results, then 4 more repeats
    # that are not run (a blocked call gets no result).
    events = pairs(5) + [call("sql_query", dict(SQL)) for _ in range(4)]
    verdicts = run(events)
    # seqs: calls 1,3,5,7,9 results 2,4,6,8,10; the repeats are 11,12,13,14
    assert summary(verdicts) == [
        ("nudge", "repetition", 4),       # seed 000: after the 2nd identical call (with its outcome)
        ("block", "repetition", 11),      # seed 003: the 6th identical call is blocked
        ("block", "repetition", 12),
        ("block", "repetition", 13),      # max_blocks = 3 blocked repeats ...
        ("terminate", "repetition", 14),  # ... then terminate(repetition_loop)
    ]
    assert verdicts[-1].termination == Termination.REPETITION_LOOP
    assert "sql_query" in verdicts[-1].message


def test_nudge_message_follows_seed_000_with_evidence():
    verdicts = run(pairs(2, failed=True, output="no rows"))
    nudge = one(verdicts, Action.NUDGE, "repetition")
    assert nudge.seq == 4
    text = nudge.message
    assert 'Tool "sql_query" was called 2 consecutive times with identical arguments' in text
    assert "SELECT * FROM users WHERE id = 7" in text      # the arguments
    assert "Last outcome: error: no rows" in text           # the last outcome
    assert "Try a different approach" in text               # what to do instead


def test_block_message_names_tool_args_count_and_outcome():
    verdicts = run(pairs(5, output="3 rows") + [call("sql_query", dict(SQL))])
    block = one(verdicts, Action.BLOCK)
    assert block.rule == "repetition" and block.seq == 11
    assert "blocked" in block.message.lower()
    assert "sql_query" in block.message
    assert "6" in block.message
    assert "SELECT * FROM users WHERE id = 7" in block.message
    assert "ok: 3 rows" in block.message
    assert "different approach" in block.message


def test_near_miss_five_identical_calls_are_only_nudged_once():
    verdicts = run(pairs(5))
    assert summary(verdicts) == [("nudge", "repetition", 4)]


def test_near_miss_single_call_and_different_args_do_nothing():
    events = [call("sql_query", {"query": f"SELECT {i}"}) for i in range(8)]
    assert run(events) == []
    assert run(pairs(1)) == []


def test_near_miss_two_blocks_do_not_terminate():
    verdicts = run(pairs(5) + [call("sql_query", dict(SQL)) for _ in range(3)])
    assert [v.action for v in verdicts] == [Action.NUDGE, Action.BLOCK, Action.BLOCK, Action.BLOCK]
    assert of(verdicts, Action.TERMINATE) == []


def test_identical_means_canonical_key_order_and_number_format_do_not_matter():
    events = [
        call("read_file", {"path": "a.py", "limit": 10, "opts": {"x": 1, "y": [1, 2.0]}}),
        ok("read_file", "line 1"),
        call("read_file", {"opts": {"y": [1.0, 2], "x": 1.0}, "limit": 10.0, "path": "a.py"}),
        ok("read_file", "line 1"),
    ]
    assert summary(run(events)) == [("nudge", "repetition", 4)]


def test_a_different_value_or_tool_is_not_identical():
    events = [
        call("read_file", {"path": "a.py", "limit": 10}), ok("read_file", "x"),
        call("read_file", {"path": "a.py", "limit": 11}), ok("read_file", "x"),
        call("cat_file", {"path": "a.py", "limit": 11}), ok("cat_file", "x"),
    ]
    assert run(events) == []


def test_call_ids_never_count():
    events = []
    for i in range(6):
        events.append(call("sql_query", dict(SQL), call_id=f"c{i}"))
        if i < 5:
            events.append(ok("sql_query", "3 rows", call_id=f"c{i}"))
    verdicts = run(events)
    assert summary(verdicts) == [("nudge", "repetition", 4), ("block", "repetition", 11)]


def test_changing_successful_output_is_progress_polling_a_build():
    # the same call polled 9 times; each successful output is new -> progress, no verdict
    # (the 10th earns the polling rule's nudge: tests/engine/test_polling.py)
    events = []
    for i in range(9):
        events += [call("bash", {"command": "make status"}), ok("bash", f"building: {i * 8}% done")]
    assert run(events) == []


def test_progress_resets_the_streak_then_a_frozen_output_counts_again():
    # polls 1-3 change their output; from poll 3 on the output stays "built 30%".
    # Calls 3..8 returned (or would return) the same thing: the 6th of that run is blocked.
    events = []
    for out in ("built 10%", "built 20%", "built 30%", "built 30%", "built 30%", "built 30%", "built 30%"):
        events += [call("bash", {"command": "make status"}), ok("bash", out)]
    events.append(call("bash", {"command": "make status"}))  # seq 15: the 6th identical call since poll 3
    verdicts = run(events)
    assert summary(of(verdicts, Action.BLOCK)) == [("block", "repetition", 15)]
    assert of(verdicts, Action.TERMINATE) == []


def test_errors_never_count_as_progress_even_when_their_text_changes():
    cfg = config("failures.max_consecutive=100", "repetition.max_same_error=100")
    events = []
    for i in range(5):
        events += [call("http_get", {"url": "https://api.example.test/v1/items"}),
                   fail("http_get", f"error: upstream replied {['502', '503', '504', '500', '429'][i]}")]
    events.append(call("http_get", {"url": "https://api.example.test/v1/items"}))
    verdicts = run(events, cfg)
    assert summary(of(verdicts, Action.BLOCK)) == [("block", "repetition", 11)]


def test_success_after_an_error_with_unchanged_successful_output_is_not_progress():
    # a flaky call: ok "3 rows", error, ok "3 rows", error, ok "3 rows" -> the successful output
    # never changed, so the 6th identical call must be blocked.
    events = []
    for i in range(5):
        events.append(call("sql_query", dict(SQL)))
        events.append(ok("sql_query", "3 rows") if i % 2 == 0 else fail("sql_query", "error: connection reset"))
    events.append(call("sql_query", dict(SQL)))
    verdicts = run(events)
    assert summary(of(verdicts, Action.BLOCK)) == [("block", "repetition", 11)]


def test_configured_counts_are_honoured():
    cfg = config("repetition.nudge_after=3", "repetition.max_identical_calls=3", "repetition.max_blocks=1")
    events = pairs(3) + [call("sql_query", dict(SQL)) for _ in range(2)]
    # nudge after the 3rd call's result (seq 6), block the 4th (7), terminate on the next (8)
    verdicts = run(events, cfg)
    assert summary(verdicts) == [("nudge", "repetition", 6), ("block", "repetition", 7),
                                 ("terminate", "repetition", 8)]
    assert verdicts[-1].termination == Termination.REPETITION_LOOP


def test_a_different_call_in_between_restarts_the_streak():
    events = pairs(4) + [call("ls", {"path": "."}), ok("ls", "a.py")] + pairs(5)
    verdicts = run(events)
    assert of(verdicts, Action.BLOCK) == []
    assert [v.action for v in verdicts] == [Action.NUDGE, Action.NUDGE]


def test_after_terminate_every_event_is_ignored():
    s = Session()
    s.feed(*pairs(5), *[call("sql_query", dict(SQL)) for _ in range(4)])
    assert s.verdicts[-1].action == Action.TERMINATE
    assert s.feed(call("sql_query", dict(SQL)), gate_request("may I?"), verr(), verr(), verr()) == []
    assert s.tick(10_000_000.0) == []
    assert s.health.termination_reason == Termination.REPETITION_LOOP
