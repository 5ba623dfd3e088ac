"""Same error from one tool, whatever its arguments (spec: Repetition, "Also catch").

fingerprint = tool + the first line that carries the error (else the first non-empty line),
normalised so volatile numbers, temp paths and timestamps do not hide a repeat while a
different failing test or error code does. After max_same_error (3) consecutive identical
fingerprints the next call to that tool is blocked regardless of its arguments; a success of
that tool clears the streak; it does not cross tools.
"""

from __future__ import annotations

import pytest

from tests.engine.helpers import Action, call, config, fail, ok, one, result, run, summary


def failing_runs(tool, outputs, cmd="pytest {i}"):
    """One call per output, each with different arguments, each answered by that error output."""
    events = []
    for i, out in enumerate(outputs):
        events += [call(tool, {"command": cmd.format(i=i)}), fail(tool, out)]
    return events


def next_call(tool="bash", command="pytest --lf -x"):
    return call(tool, {"command": command})


PYTEST = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.11.9, pytest-8.2.0\n"
    "collected {n} items\n\n"
    "FAILED tests/test_auth.py::test_login - AssertionError: assert 401 == 200 ({t}s)\n"
    "========================= 1 failed, {p} passed in {t}s =========================\n"
)


def pytest_output(n, t, p):
    return PYTEST.format(n=n, t=t, p=p)


def test_three_identical_errors_block_the_next_call_to_that_tool_whatever_its_args():
    outs = [pytest_output(12, "0.53", 11), pytest_output(12, "1.27", 11), pytest_output(12, "0.08", 11)]
    verdicts = run(failing_runs("bash", outs) + [next_call()])
    assert summary(verdicts) == [("block", "same_error", 7)]
    text = verdicts[0].message
    assert "blocked" in text.lower()
    assert "bash" in text
    assert "same error" in text and "3" in text
    assert "test_login" in text                          # the evidence: which error
    assert "instead" in text or "different" in text      # what to do instead


def test_near_miss_two_identical_errors_do_not_block():
    outs = [pytest_output(12, "0.53", 11), pytest_output(12, "1.27", 11)]
    assert run(failing_runs("bash", outs) + [next_call()]) == []


def test_configured_limit():
    outs = ["Error: 404 Not Found", "Error: 404 Not Found"]
    cfg = config("repetition.max_same_error=2")
    assert summary(run(failing_runs("http", outs, "GET /u/{i}") + [next_call("http", "GET /x")], cfg)) == [
        ("block", "same_error", 5)]


@pytest.mark.parametrize("outputs", [
    pytest.param(["2024-05-01T10:00:01Z ERROR db: connection refused",
                  "2024-05-01T10:00:07Z ERROR db: connection refused",
                  "2024-05-01T10:01:59Z ERROR db: connection refused"], id="timestamps"),
    pytest.param(["[12:00:01.123] error: build failed",
                  "[12:00:09.987] error: build failed",
                  "[12:03:44.001] error: build failed"], id="clock-times"),
    pytest.param(["FileNotFoundError: [Errno 2] No such file or directory: '/tmp/tmpa1b2c3/config.yaml'",
                  "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/tmpzz91kq/config.yaml'",
                  "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/tmp0x7f3e/config.yaml'"],
                 id="temp-paths"),
    pytest.param(["Error: request timed out after 3021ms (request id 884213)",
                  "Error: request timed out after 2990ms (request id 884377)",
                  "Error: request timed out after 3107ms (request id 901112)"], id="durations-and-ids"),
    pytest.param(["panic: runtime error: invalid memory address at 0xc000012345",
                  "panic: runtime error: invalid memory address at 0xc0000ab010",
                  "panic: runtime error: invalid memory address at 0xc00019ff00"], id="addresses"),
])
def test_volatile_parts_do_not_hide_a_repeat(outputs):
    verdicts = run(failing_runs("bash", outputs) + [next_call()])
    assert summary(verdicts) == [("block", "same_error", 7)]


@pytest.mark.parametrize("outputs", [
    pytest.param([pytest_output(12, "0.5", 11), pytest_output(12, "0.5", 11),
                  pytest_output(12, "0.5", 11).replace("test_login", "test_logout")], id="failing-test-name"),
    pytest.param(["error[E0308]: mismatched types", "error[E0308]: mismatched types",
                  "error[E0599]: mismatched types"], id="rustc-error-code"),
    pytest.param(["src/app.ts(3,5): error TS2322: Type 'string' is not assignable",
                  "src/app.ts(3,5): error TS2322: Type 'string' is not assignable",
                  "src/app.ts(3,5): error TS2345: Type 'string' is not assignable"], id="tsc-error-code"),
    pytest.param(["Error: HTTP 404 from registry", "Error: HTTP 404 from registry",
                  "Error: HTTP 500 from registry"], id="http-status"),
])
def test_a_different_failing_test_or_error_code_is_a_different_fingerprint(outputs):
    assert run(failing_runs("bash", outputs) + [next_call()]) == []


def test_a_different_parametrised_failing_test_is_a_different_fingerprint():
    first = "FAILED tests/test_math.py::test_round[0.5] - assert 2 == 1"
    third = "FAILED tests/test_math.py::test_round[1.5] - assert 2 == 1"
    assert run(failing_runs("bash", [first, first, third]) + [next_call()]) == []


def test_a_failing_test_with_a_long_number_in_its_name_is_a_different_fingerprint():
    first = "FAILED tests/test_cases.py::test_case_10001 - assert 2 == 1"
    third = "FAILED tests/test_cases.py::test_case_10002 - assert 2 == 1"
    assert run(failing_runs("bash", [first, first, third]) + [next_call()]) == []


@pytest.mark.parametrize("first,third", [
    ("error: ORA-00942: statement failed", "error: ORA-01017: statement failed"),
    ("ERROR: SQLSTATE 23505 while inserting row", "ERROR: SQLSTATE 40001 while inserting row"),
], ids=["oracle", "sqlstate"])
def test_five_digit_error_codes_are_different_fingerprints(first, third):
    assert run(failing_runs("bash", [first, first, third]) + [next_call()]) == []


def test_the_line_that_carries_the_error_is_used_not_the_first_line():
    outs = [pytest_output(3, "0.5", 2), pytest_output(7, "0.5", 6), pytest_output(12, "0.5", 11)]
    verdicts = run(failing_runs("bash", outs) + [next_call()])
    assert summary(verdicts) == [("block", "same_error", 7)]


def test_without_an_error_line_the_first_non_empty_line_is_the_fingerprint():
    same_first = ["\n   \nKilled\ntrace 1", "Killed\ntrace 2", "\nKilled\ntrace 3"]
    assert summary(run(failing_runs("bash", same_first) + [next_call()])) == [("block", "same_error", 7)]
    different_first = ["alpha\nsame tail", "beta\nsame tail", "gamma\nsame tail"]
    assert run(failing_runs("bash", different_first) + [next_call()]) == []


def test_a_success_of_that_tool_clears_the_streak():
    err = "Error: 404 Not Found"
    events = failing_runs("http", [err, err], "GET /a/{i}")
    events += [call("http", {"command": "GET /health"}), ok("http", "200 OK")]
    events += failing_runs("http", [err], "GET /b/{i}") + [next_call("http", "GET /c")]
    assert run(events) == []


def test_a_success_of_another_tool_does_not_clear_the_streak():
    err = "Error: 404 Not Found"
    events = failing_runs("http", [err, err, err], "GET /a/{i}")
    events += [call("read_file", {"path": "notes.md"}), ok("read_file", "# notes")]
    events += [next_call("http", "GET /b")]
    assert summary(run(events)) == [("block", "same_error", 9)]


def test_does_not_cross_tools():
    err = "Error: 404 Not Found"
    events = failing_runs("http", [err, err], "GET /a/{i}") + failing_runs("curl", [err], "-s /a/{i}")
    events += [next_call("http", "GET /b"), ok("http", "x"), next_call("curl", "-s /b")]
    assert run(events) == []


def test_block_only_hits_the_tool_that_failed():
    def events():
        err = "Error: 404 Not Found"
        return failing_runs("http", [err, err, err], "GET /a/{i}") + [call("read_file", {"path": "x"})]
    assert run(events()) == []
    assert one(run(events() + [next_call("http", "GET /z")]), Action.BLOCK, "same_error").seq == 8


def test_results_are_attributed_by_call_id_when_calls_run_in_parallel():
    # each round: an http call and a read_file call in flight; the read_file success arrives
    # first and must not clear http's streak; results carry only the call_id
    events = []
    for i in range(3):
        events += [call("http", {"url": f"/v1/a/{i}"}, call_id=f"h{i}"),
                   call("read_file", {"path": f"f{i}.md"}, call_id=f"r{i}"),
                   result("# notes", call_id=f"r{i}"),
                   result("Error: 404 Not Found", call_id=f"h{i}", is_error=True)]
    events.append(call("http", {"url": "/v1/b"}, call_id="h9"))
    assert summary(run(events)) == [("block", "same_error", 13)]
