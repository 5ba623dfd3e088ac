"""Decision 74's loop counter (seed 002).

"the first failure is count 0, each exact repeat adds one, so the default (loop.gate_after=3)
gates at the fourth identical failure", with the failure history as evidence. Test progress
(fewer failures, more coverage) does not count, regression (more failures) does;
near-duplicate collaboration requests between the same two agents count; the counter is not
reset on an agent change; it is reset on task completion and on a human decision.
"""

from __future__ import annotations

from tests.engine.helpers import (
    Action, Session, attempt, collab, config, done, error, history_seqs, of, one, run, summary, suite,
)

MSG = "TypeError: cannot read property 'x' of undefined"
ISOLATED = config("failures.max_consecutive=100")  # error events also feed consecutive failures


def gates(verdicts):
    return of(verdicts, Action.GATE)


def test_fourth_identical_failure_opens_a_gate_with_the_failure_history():
    s = Session(ISOLATED)
    verdicts = s.feed(*[error(MSG) for _ in range(4)])
    assert summary(verdicts) == [("gate", "loop_counter", 4)]
    gate = verdicts[0]
    assert gate.gate_id is not None
    assert [g.id for g in s.health.pending_gates()] == [gate.gate_id]
    assert history_seqs(gate.evidence) == [1, 2, 3, 4]
    assert MSG in str(gate.evidence)
    assert "loop" in gate.reason.lower() and "3" in gate.reason


def test_near_miss_three_identical_failures():
    assert run([error(MSG) for _ in range(3)], ISOLATED) == []


def test_different_messages_are_not_repeats():
    events = [error(f"TypeError: cannot read property '{p}' of undefined") for p in "abcdefg"]
    assert run(events, ISOLATED) == []


def test_a_repeat_of_any_earlier_failure_of_the_task_counts():
    # seed 002: "Check exact message match against recent failures (same task)"
    a, b = "SyntaxError at line 42", "ImportError: no module named foo"
    assert summary(run([error(a), error(b), error(a), error(b), error(a)], ISOLATED)) == [
        ("gate", "loop_counter", 5)]
    assert run([error(a), error(b), error(a), error(b)], ISOLATED) == []


def test_the_count_is_per_task():
    events = [error(MSG, task="T1"), error(MSG, task="T1"), error(MSG, task="T2"), error(MSG, task="T2"),
              error(MSG, task="T1"), error(MSG, task="T2")]
    assert run(events, ISOLATED) == []


def test_not_reset_on_agent_change():
    events = [error(MSG, agent="backend_dev"), error(MSG, agent="backend_dev"),
              error(MSG, agent="backend_dev_2"), error(MSG, agent="backend_dev_2")]
    assert summary(run(events, ISOLATED)) == [("gate", "loop_counter", 4)]


def test_reset_on_task_completion_done():
    events = [error(MSG) for _ in range(3)] + [done(task="T1")] + [error(MSG) for _ in range(3)]
    assert run(events, ISOLATED) == []
    events = [error(MSG) for _ in range(3)] + [done(task="T1")] + [error(MSG) for _ in range(4)]
    assert summary(run(events, ISOLATED)) == [("gate", "loop_counter", 8)]


def test_reset_on_task_completion_attempt_done():
    events = [error(MSG) for _ in range(3)] + [attempt("T1", "done")] + [error(MSG) for _ in range(3)]
    assert run(events, ISOLATED) == []


def test_completion_of_another_task_does_not_reset():
    events = [error(MSG) for _ in range(3)] + [done(task="T2"), error(MSG)]
    assert summary(run(events, ISOLATED)) == [("gate", "loop_counter", 5)]


def test_reset_on_human_decision():
    s = Session(ISOLATED)
    gate = one(s.feed(*[error(MSG) for _ in range(4)]), Action.GATE)
    assert s.decide(gate.gate_id, True) == []
    assert s.feed(*[error(MSG) for _ in range(3)]) == []          # counting starts over at 0
    assert summary(s.feed(error(MSG))) == [("gate", "loop_counter", 8)]


# ---- test progress ---------------------------------------------------------
def test_identical_test_failures_count():
    def same(n):
        return [suite(2, failing=["test_a", "test_b"], coverage=60.0) for _ in range(n)]
    assert summary(run(same(4))) == [("gate", "loop_counter", 4)]
    assert run(same(3)) == []


def test_more_coverage_is_progress_and_does_not_count():
    events = [suite(2, failing=["test_a", "test_b"], coverage=c) for c in (60.0, 65.0, 70.0, 75.0, 80.0)]
    assert run(events) == []


def test_fewer_failing_tests_is_progress_and_does_not_count():
    assert run([suite(n) for n in (8, 5, 3, 1)]) == []
    # the same failure three times (count 2), then fewer failures: still no gate
    assert run([suite(3), suite(3), suite(3), suite(2)]) == []


def test_more_failing_tests_is_a_regression_and_counts():
    # seed 002's "progressive degradation": 1, 3, 5, 8 failing
    verdicts = run([suite(n) for n in (1, 3, 5, 8)])
    assert summary(verdicts) == [("gate", "loop_counter", 4)]
    assert run([suite(n) for n in (1, 3, 5)]) == []


def test_all_tests_passing_is_not_a_failure():
    assert run([suite(0, passed=12) for _ in range(6)]) == []


# ---- collaboration loops ------------------------------------------------------
SEED_FIRST = "Can you review this authentication code?"
SEED_AGAIN = "Can you review this auth code again?"


def test_near_duplicate_collaboration_requests_between_the_same_agents_count():
    def asks(n):
        return [collab("backend_dev", "security_expert", (SEED_FIRST, SEED_AGAIN)[i % 2]) for i in range(n)]
    verdicts = run(asks(4))
    assert summary(verdicts) == [("gate", "loop_counter", 4)]
    assert "backend_dev" in verdicts[0].reason and "security_expert" in verdicts[0].reason
    assert run(asks(3)) == []


def test_requests_to_another_agent_do_not_count():
    events = [collab("backend_dev", "security_expert", SEED_FIRST),
              collab("backend_dev", "qa_engineer", SEED_AGAIN),
              collab("backend_dev", "dba", SEED_FIRST),
              collab("backend_dev", "frontend_dev", SEED_AGAIN)]
    assert run(events) == []


def test_unrelated_requests_do_not_count():
    requests = [SEED_FIRST, "Please run the database migration on staging.",
                "What is the expected token expiry for refresh tokens?", "Draft release notes for v2.3."]
    assert run([collab("backend_dev", "security_expert", r) for r in requests]) == []


def test_similarity_is_pluggable():
    always = Session(similarity=lambda a, b: 1.0)
    requests = ["deploy", "write docs", "fix lint", "bump version"]
    assert summary(always.feed(*[collab("a", "b", r) for r in requests])) == [("gate", "loop_counter", 4)]
    never = Session(similarity=lambda a, b: 0.0)
    assert never.feed(*[collab("a", "b", SEED_FIRST) for _ in range(4)]) == []


def test_gate_after_is_configurable():
    cfg = config("loop.gate_after=1", "failures.max_consecutive=100")
    assert summary(run([error(MSG), error(MSG)], cfg)) == [("gate", "loop_counter", 2)]
    assert run([error(MSG)], cfg) == []


# ---- failed tool results: what Claude Code, Codex and ACP agents report -------------------------
def _failed_run(output: str, n: int, tool: str = "Bash", **kw) -> list:
    from tests.engine.helpers import call, fail
    return [e for i in range(n) for e in (call(tool, {"command": "pytest -x"}, call_id=f"c{i}"),
                                          fail(tool, output.format(i=i, t=40 + i), call_id=f"c{i}", **kw))]


PYTEST_FAIL = ("============ test session starts ============\nrootdir: /tmp/pytest-of-ann/pytest-{i}/repo\n"
               "tests/test_x.py:12: AssertionError: assert 1 == 2\n"
               "FAILED tests/test_x.py::test_add - assert 1 == 2\n1 failed in 0.{t}s at 2026-12-07 01:{t}:00")
ONLY_LOOPS = config("failures.max_consecutive=100", "reflections.max_rounds=0", "repetition.max_same_error=100",
                    "repetition.max_identical_calls=100", "repetition.nudge_after=100",
                    "repetition.progress_nudge_after=100", "repetition.progress_gate_after=100")


def test_the_fourth_same_failed_tool_result_opens_the_gate_whatever_its_volatile_parts():
    verdicts = run(_failed_run(PYTEST_FAIL, 4), ONLY_LOOPS)
    assert summary(verdicts) == [("gate", "loop_counter", 8)]
    failures = verdicts[0].evidence["failures"]
    assert [f["location"] for f in failures] == ["tests/test_x.py:12"] * 4
    assert "assert 1 == 2" in failures[0]["message"]
    assert run(_failed_run(PYTEST_FAIL, 3), ONLY_LOOPS) == []  # near miss: three of them


def test_a_moved_line_or_a_different_tool_is_a_different_failure():
    moved = _failed_run("tests/test_x.py:{i}: AssertionError", 6)
    assert run(moved, ONLY_LOOPS) == []
    by_tool = [e for tool in ("Bash", "Read", "Grep", "Glob") for e in _failed_run("error: no such file", 1, tool)]
    assert run(by_tool, ONLY_LOOPS) == []


def test_a_non_zero_exit_code_is_a_failure_and_a_success_between_does_not_reset_the_count():
    from tests.engine.helpers import call, ok, result
    events = []
    for i in range(4):
        events += [call("shell", {"command": "make"}, call_id=f"m{i}"),
                   result("make: *** [all] Error 2", tool="shell", call_id=f"m{i}", exit_code=2),
                   call("Read", {"path": f"f{i}"}), ok("Read", "text")]
    assert summary(run(events, ONLY_LOOPS)) == [("gate", "loop_counter", 14)]


def test_different_calls_failing_with_the_same_output_are_no_loop():
    # failures that do not name what was asked: four searches that find nothing (grep's exit 1, no output),
    # four reads of missing files, four fetches of missing pages; each a different call
    from tests.engine.helpers import call, fail, result
    events = []
    for i in range(4):
        events += [call("Bash", {"command": f"grep -rn helper{i} src"}, call_id=f"g{i}"),
                   result("", tool="Bash", call_id=f"g{i}", exit_code=1),
                   call("Read", {"file_path": f"/repo/notes{i}.md"}, call_id=f"r{i}"),
                   fail("Read", "File does not exist.", call_id=f"r{i}"),
                   call("WebFetch", {"url": f"https://docs.example/page{i}"}),
                   fail("WebFetch", "Request failed with status code 404")]
    assert run(events, ONLY_LOOPS) == []
    same = [e for _ in range(4) for e in (call("Read", {"file_path": "/repo/notes.md"}),
                                          fail("Read", "File does not exist."))]
    assert summary(run(same, ONLY_LOOPS)) == [("gate", "loop_counter", 8)]  # the same call, id-less: a loop


def test_a_huge_failure_is_kept_by_its_first_characters_and_still_told_apart():
    from loopwarden.supervisor.health import SessionHealth
    from tests.engine.helpers import call, error, fail
    health = SessionHealth(ONLY_LOOPS)
    line = "error: " + "x" * 1_000_000
    events = [call("Bash", {"command": "make"}, call_id="m"),
              fail("Bash", line + "\nsrc/" + "a" * 500_000 + ".c:3: bad", call_id="m"),
              error(line + "1", task=None), error(line + "2", task=None), error(line + "1", task=None)]
    for seq, event in enumerate(events, 1):
        event.seq = seq
        health.observe(event, float(seq))
    guard = next(g for g in health.guards if g.name == "loop_counter")
    kept = guard.tracker("default").history
    assert len(kept) == 4 and max(len(s.exact_message) + len(s.location) for s in kept) <= 600
    assert guard.tracker("default").loop_count == 1  # messages that differ past the kept part are two


def test_failed_outputs_are_read_only_when_the_same_call_fails_again_and_unread_ones_stay_within_a_budget():
    """A failure no other failure answers the same call as is never normalised; the outputs kept unread are
    bounded in characters, however many calls fail."""
    from loopwarden.supervisor.guards.loop_counter import _UNREAD_BUDGET, ToolFailure
    from loopwarden.supervisor.health import SessionHealth
    from tests.engine.helpers import call, fail
    health = SessionHealth(ONLY_LOOPS)
    guard = next(g for g in health.guards if g.name == "loop_counter")
    seq = 0
    for n in range(40):  # forty different calls, each failing once with 60k characters
        for event in (call("Bash", {"command": f"make t{n}"}, call_id=f"c{n}"),
                      fail("Bash", f"error {n}: " + "y" * 60_000, call_id=f"c{n}")):
            seq += 1
            event.seq = seq
            health.observe(event, float(seq))
    kept = list(guard.tracker("default").history)
    assert all(type(f) is ToolFailure for f in kept)
    assert sum(len(f.output) for f in guard.unread) <= _UNREAD_BUDGET
    assert any(f.output for f in kept)  # the newest are still unread: no repeat asked for their key
    for event in (call("Bash", {"command": "make t39"}, call_id="again"),
                  fail("Bash", "error 39: " + "y" * 60_000, call_id="again")):
        seq += 1
        event.seq = seq
        health.observe(event, float(seq))
    assert guard.tracker("default").loop_count == 1  # the same call, the same failure: read, and a repeat
