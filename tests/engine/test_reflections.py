"""Reflections (Aider's max_reflections = 3): failed test or lint rounds per task since the last
human message or passing round. Three are allowed; the 4th failed round opens a gate."""

from __future__ import annotations

from tests.engine.helpers import (Action, call, config, fail, ok, one, result, run, suite, summary, user)


_edits = iter(range(10**6))


def round_(command="pytest -q tests", passed=False, output=None, edit=True, **kw):
    """An edit (each one different), then a test or lint command that fails (or passes)."""
    n = next(_edits)
    change = {"file_path": "a.py", "old_string": f"v{n}", "new_string": f"v{n + 1}"}
    out = [call("Edit", change), ok("Edit")] if edit else []
    out.append(call("Bash", {"command": command}, **kw))
    output = output or f"FAILED tests/test_a.py::test_{n} - assert {n} == {n + 1}"  # a different failure each round
    out.append(ok("Bash", "10 passed") if passed else result(output, tool="Bash", exit_code=1))
    return out


def test_fourth_failed_round_opens_a_gate_with_the_rounds_as_evidence():
    events = round_() + round_("ruff check .", output="E501 line too long") + round_() + round_()
    verdicts = run(events)
    gate = one(verdicts, Action.GATE, "reflections")
    assert summary(verdicts) == [("gate", "reflections", 16)]
    assert gate.evidence["rounds"] == 4 and gate.evidence["limit"] == 3
    assert [r["round"] for r in gate.evidence["history"]][:2] == ["pytest -q tests", "ruff check ."]
    assert "4 failed test or lint rounds" in gate.message and "budget 3" in gate.message


def test_near_miss_three_failed_rounds_and_a_pass_between():
    assert run(round_() * 1 + round_() + round_()) == []
    assert run(round_() + round_() + round_(passed=True) + round_() + round_()) == []
    assert run(round_() + round_() + round_() + [suite(0, task=None)] + round_()) == []


def test_a_human_message_starts_a_new_budget_and_tasks_are_apart():
    assert run(round_() + round_() + round_() + [user()] + round_() + round_()) == []
    a = round_(task="A") + round_(task="A")
    b = round_(task="B") + round_(task="B")
    assert run(a + b) == []


def test_other_commands_and_failures_do_not_count():
    events = []
    for _ in range(5):
        events += [call("Bash", {"command": "git status --porcelain"}), fail("Bash", "fatal: not a git repository")]
        events += [call("Bash", {"command": "ls pytest_notes"}), ok("Bash", "x")]
    assert [v for v in run(events) if v.rule == "reflections"] == []
    argv = [call("shell", {"command": ["bash", "-lc", "cargo test"]}), result("test failed", exit_code=101)]
    assert one(run(argv * 4), Action.GATE, "reflections").evidence["rounds"] == 4


def test_the_budget_is_a_key():
    assert summary(run(round_() + round_(), config("reflections.max_rounds=1"))) == [("gate", "reflections", 8)]
    assert run(round_() * 0 + round_() + round_() + round_() + round_() + round_(),
               config("reflections.max_rounds=0")) == []
    custom = config("reflections.commands=just check")
    assert one(run(round_("just check") * 1 + round_("just check") + round_("just check") + round_("just check"),
                   custom), Action.GATE, "reflections")


# ---- a failing test_result answering a check command (the agent's own report of the run) -----------------------
def report_round(failed: int, exit_code: int | None = 0, command: str = "pytest -q", **kw):
    """An edit, a check command, then its result and the agent's test report (the report first when exit_code is
    None: the result has not come)."""
    n = next(_edits)
    out = [call("Edit", {"file_path": "a.py", "old_string": f"v{n}", "new_string": f"v{n + 1}"}), ok("Edit"),
           call("Bash", {"command": command}, **kw)]
    report = suite(failed, 10 - failed, failing=[f"test_{i}" for i in range(failed)])
    if exit_code is None:
        return [*out, report]
    return [*out, result(f"{failed} failed", tool="Bash", exit_code=exit_code), report]


def test_four_failing_reports_in_a_row_open_the_gate_even_as_the_failures_shrink():
    for exit_code in (0, None):  # a result that says nothing (exit 0) then the report; the report alone
        events = [e for failed in (4, 3, 2, 1) for e in report_round(failed, exit_code)]
        gate = one(run(events), Action.GATE, "reflections")
        assert gate.evidence["rounds"] == 4
        assert [r["outcome"] for r in gate.evidence["history"]] == [
            "4 failing tests: test_0, test_1, test_2, test_3", "3 failing tests: test_0, test_1, test_2",
            "2 failing tests: test_0, test_1", "1 failing tests: test_0"]


def test_a_report_is_counted_once_with_its_failed_result_and_a_passing_report_ends_the_rounds():
    events = [e for failed in (4, 3, 2) for e in report_round(failed, exit_code=1)]
    assert run(events) == []  # three failed rounds, each with its result and its report: three, not six
    assert run(events + report_round(0) + report_round(1)) == []
    assert run(events + report_round(1, exit_code=1)) != []


def test_a_report_answering_no_check_command_is_not_a_round():
    events = []
    for n, failed in enumerate((4, 3, 2, 1, 1)):
        events += [call("Bash", {"command": f"ls d{n}"}), ok("Bash", "a.py"), suite(failed)]
    assert run(events, config("loop.gate_after=0")) == []


def test_a_check_wrapped_by_the_agents_shell_is_still_a_check():
    from loopwarden.supervisor.checks import CheckCommands
    checks = CheckCommands(config().reflections.commands)
    for command in ("bash -lc 'pytest -q'", '/bin/zsh -lc "cd repo && npm test"', "sh -c 'go test ./...'",
                    "uv run ruff check .", "(cargo test)", "python -m pytest tests"):
        assert checks.matches(command), command
    for command in ("bash -lc 'ls pytest_notes'", "echo 'pytestx'", "git commit -m 'fix npm tests'"):
        assert not checks.matches(command), command
    assert checks.of_call({"command": ["bash", "-lc", "eslint src"]}) == "bash -lc eslint src"


def test_a_check_named_in_an_argument_is_no_check():
    # grep finding nothing and `which` of a missing tool exit 1: such failures are no failed test round
    from loopwarden.supervisor.checks import CheckCommands
    checks = CheckCommands(config().reflections.commands)
    for command in ("git commit -m 'fix pytest'", 'grep -rn "pytest" .', "which ruff", "pip install pytest",
                    "echo 'ran mypy'", "bash -lc 'rg \"cargo test\" docs'"):
        assert not checks.matches(command), command
    for command in ("CI=1 timeout 600 .venv/bin/pytest -x", "cd a && make test 2>&1 | tail -5", "npx jest",
                    "sudo -E pytest", "bash -lc 'ls && poetry run mypy src'"):
        assert checks.matches(command), command
    events = [e for _ in range(5) for e in (call("Bash", {"command": 'grep -rn "pytest" src'}),
                                            result("", tool="Bash", exit_code=1))]
    assert [v for v in run(events) if v.rule == "reflections"] == []
