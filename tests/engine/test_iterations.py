"""Iterations and escalation (seed 004).

Model escalation after escalation.failures_per_model (2) consecutive failed `iteration`
events along haiku -> sonnet -> opus -> human; tool errors do not count here. Reading chosen
for the top of the ladder: seed 004 ("3 consecutive failures (opus) -> Activate Bug Council",
escalation.failures_at_top = 3), so opus hands over to a human after 3 failed iterations.
Stuck patterns over the last 3 iterations: same files modified with failures, same failing
tests, same error. max_iterations (10): seed 004 "check: iteration_count < max_iterations",
"Max iterations -> HALT".
"""

from __future__ import annotations

from tests.engine.helpers import (
    Action, Termination, call, config, fail, iteration, of, run, summary,
)

NO_LADDER = config("escalation.failures_per_model=100", "escalation.failures_at_top=100")


def failed(n, **kw):
    """A failed iteration whose files, tests and error are all its own (no stuck pattern)."""
    kw.setdefault("files", [f"src/mod{n}.py"])
    kw.setdefault("failing", [f"tests/test_mod{n}.py::test_it"])
    kw.setdefault("error", f"AssertionError in mod{n}")
    return iteration(n, "fail", **kw)


def passed(n):
    return iteration(n, "pass", files=[f"src/ok{n}.py"])


def test_two_consecutive_failed_iterations_escalate_haiku_to_sonnet():
    verdicts = run([failed(1), failed(2)])
    assert summary(verdicts) == [("escalate", "model_escalation", 2)]
    v = verdicts[0]
    assert v.target == "sonnet"
    assert "haiku" in v.message and "sonnet" in v.message
    assert "2 consecutive failed iterations" in v.message


def test_near_miss_one_failure_or_a_pass_between():
    assert run([failed(1)]) == []
    assert run([failed(1), passed(2), failed(3)]) == []


def test_the_full_ladder_haiku_sonnet_opus_human():
    verdicts = run([failed(n) for n in range(1, 8)])
    assert [(v.action, v.target, v.seq) for v in verdicts] == [
        (Action.ESCALATE, "sonnet", 2),
        (Action.ESCALATE, "opus", 4),
        (Action.ESCALATE, "human", 7),
    ]
    assert "opus" in verdicts[2].message


def test_near_miss_two_failures_on_opus_do_not_call_a_human():
    verdicts = run([failed(n) for n in range(1, 7)])
    assert [v.target for v in verdicts] == ["sonnet", "opus"]


def test_tool_errors_do_not_count_as_failed_iterations():
    events = [failed(1)]
    for i in range(4):
        events += [call("bash", {"command": f"step {i}"}), fail("bash", f"error {chr(97 + i)}")]
    assert of(run(events), Action.ESCALATE) == []


def test_tool_errors_between_failed_iterations_do_not_break_the_streak():
    events = [failed(1), call("bash", {"command": "x"}), fail("bash", "boom"), failed(2)]
    verdicts = run(events)
    assert [(v.action, v.target, v.seq) for v in verdicts] == [(Action.ESCALATE, "sonnet", 4)]


def test_custom_ladder_and_threshold():
    cfg = config("escalation.models=small,large", "escalation.failures_per_model=3")
    verdicts = run([failed(n) for n in range(1, 4)], cfg)
    assert [(v.target, v.seq) for v in verdicts] == [("large", 3)]


# ---- stuck patterns ------------------------------------------------------------
def test_same_files_modified_with_failures_three_times_is_stuck():
    events = [failed(n, files=["src/auth.py"]) for n in (1, 2, 3)]
    verdicts = run(events, NO_LADDER)
    assert [(v.action, v.rule, v.seq) for v in verdicts] == [(Action.ESCALATE, "stuck_loop", 3)]
    assert "stuck" in verdicts[0].message.lower() and "src/auth.py" in verdicts[0].message


def test_same_files_modified_while_passing_is_not_stuck():
    events = [iteration(n, "pass", files=["src/auth.py"]) for n in (1, 2, 3)]
    assert run(events, NO_LADDER) == []


def test_same_failing_tests_three_times_is_stuck():
    events = [failed(n, failing=["tests/test_auth.py::test_login"]) for n in (1, 2, 3)]
    verdicts = run(events, NO_LADDER)
    assert [(v.action, v.rule, v.seq) for v in verdicts] == [(Action.ESCALATE, "stuck_loop", 3)]
    assert "test_login" in verdicts[0].message


def test_same_error_three_times_is_stuck():
    events = [failed(n, error="KeyError: 'user_id'") for n in (1, 2, 3)]
    verdicts = run(events, NO_LADDER)
    assert [(v.action, v.rule, v.seq) for v in verdicts] == [(Action.ESCALATE, "stuck_loop", 3)]
    assert "KeyError" in verdicts[0].message


def test_near_miss_stuck_patterns_need_three():
    events = [failed(1, files=["a.py"], failing=["t"], error="E"), failed(2, files=["a.py"], failing=["t"], error="E")]
    assert run(events, NO_LADDER) == []
    events += [failed(3)]  # the third differs in all three respects
    assert run(events, NO_LADDER) == []


# ---- max iterations ------------------------------------------------------------
def test_max_iterations_terminates_when_the_tenth_iteration_fails():
    events = [passed(n) for n in range(1, 10)] + [failed(10)]
    verdicts = run(events)
    assert summary(verdicts) == [("terminate", "iterations", 10)]
    assert verdicts[0].termination == Termination.MAX_ITERATIONS
    assert "10" in verdicts[0].message


def test_near_miss_nine_iterations():
    assert run([passed(n) for n in range(1, 9)] + [failed(9)]) == []


def test_an_eleventh_iteration_is_never_allowed():
    verdicts = run([passed(n) for n in range(1, 12)])
    assert [(v.termination, v.seq) for v in verdicts] == [(Termination.MAX_ITERATIONS, 11)]


def test_max_iterations_is_configurable():
    cfg = config("limits.max_iterations=3", "escalation.failures_per_model=100", "escalation.failures_at_top=100")
    verdicts = run([passed(1), passed(2), failed(3)], cfg)
    assert [(v.termination, v.seq) for v in verdicts] == [(Termination.MAX_ITERATIONS, 3)]
