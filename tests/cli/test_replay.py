"""`loopwarden replay` and `demo` as a user runs them: a real subprocess, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import DATA, ROOT, recording


def lw(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "loopwarden", *args], input=stdin, capture_output=True,
                          env=full_env, timeout=60, check=False)


def verdicts(proc: subprocess.CompletedProcess[bytes]) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_demo_replays_the_bundled_example_and_explains_each_verdict(tmp_path: Path) -> None:
    proc = lw("demo", "--replay", env={"XDG_CACHE_HOME": str(tmp_path)})
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    for rule in ("repetition", "same_error", "monologue", "validation", "alternation", "stall",
                 "large_output", "loop_counter", "blocked_task_spin", "model_escalation"):
        assert rule in out
    assert "final state: terminated (repetition_loop)" in out
    spilled = list((tmp_path / "loopwarden" / "spill").iterdir())
    assert len(spilled) == 1 and oct(spilled[0].stat().st_mode & 0o777) == "0o600"


def test_replay_prints_one_json_line_per_verdict_with_seq_action_rule_reason(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    call = '{"type":"tool_call","tool":"grep","args":{"q":"x"}}\n{"type":"tool_result","output":"none"}\n'
    stream.write_text(call * 3, encoding="utf-8")
    proc = lw("replay", str(stream))
    assert proc.returncode == 0
    [nudge] = verdicts(proc)
    assert nudge["seq"] == 4 and nudge["action"] == "nudge" and nudge["rule"] == "repetition"
    assert "grep" in nudge["message"] and nudge["reason"]
    assert "final state: running (the recording ends here; nothing stopped the session)" in proc.stderr.decode()


def test_a_one_line_recording_reads_one_line(tmp_path: Path) -> None:
    stream = tmp_path / "one.jsonl"
    stream.write_text('{"type":"tool_call","tool":"grep","args":{"q":"x"}}\n', encoding="utf-8")
    proc = lw("replay", str(stream))
    assert proc.returncode == 0 and "; 1 line read, 0 ignored; 1 events" in proc.stderr.decode()


def test_replay_reads_stdin_and_reports_every_bad_input_kind_without_crashing() -> None:
    bad = b"\n".join([
        b"\xff\xfe not utf-8",
        b"{not json",
        b"[1, 2]",
        b'{"type":"teleport"}',
        b'{"type":"tool_call","tool":"x"}',
        b"[" * 5000 + b"]" * 5000,
        b'{"type":"tool_call","tool":"x","args":' + b'{"a":' * 200 + b"1" + b"}" * 200 + b"}",
        b'{"type":"done"}',
    ])
    proc = lw("replay", "--summary-json", "--set", "validation.max_consecutive=0", "-", stdin=bad)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stderr)
    reasons = {v["seq"]: v["reason"] for v in summary["validation_examples"]}
    assert reasons[1] == "not valid UTF-8"
    assert reasons[2].startswith("not valid JSON")
    assert reasons[3] == "not a JSON object (got list)"
    assert reasons[4] == "unknown type 'teleport'"
    assert reasons[5] == "tool_call: missing required field 'args'"
    assert reasons[6] == reasons[7] == "JSON nested too deeply (more than 64 levels)"  # orjson's 1024, then ours
    assert summary["validation_failures"] == 7
    assert summary["state"] == "done"


def test_replay_judges_a_call_at_the_depth_bound_and_rejects_every_deeper_one() -> None:
    from loopwarden.supervisor.bounds import MAX_DEPTH, TOO_DEEP

    def call(depth: int) -> bytes:  # the line nests `depth` levels, its own object included
        return b'{"type":"tool_call","tool":"t","args":' + b'{"a":' * (depth - 2) + b"{}" + b"}" * (depth - 1)

    deeper = [MAX_DEPTH + 1, 250, 255, 1023, 1024, 1025, 5000]
    stream = b"\n".join([call(MAX_DEPTH)] * 3 + [call(d) for d in deeper] + [b'{"type":"done"}'])
    proc = lw("replay", "--summary-json", "--set", "validation.max_consecutive=0", "-", stdin=stream)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stderr)
    assert summary["by_type"]["tool_call"] == 3 and summary["state"] == "done"
    assert ("nudge", "repetition") in [(v["action"], v["rule"]) for v in verdicts(proc)]  # judged, not just read
    assert summary["validation_examples"] == [{"seq": seq, "reason": TOO_DEEP} for seq in range(4, 4 + len(deeper))]


def test_an_over_long_line_is_a_validation_failure() -> None:
    big = b'{"type":"tool_result","output":"' + b"x" * 3000 + b'"}\n{"type":"done"}\n'
    proc = lw("replay", "--summary-json", "--set", "limits.max_line_bytes=1KiB", "-", stdin=big)
    summary = json.loads(proc.stderr)
    assert summary["validation_examples"] == [{"seq": 1, "reason": "line longer than 1,024 bytes (3,034 bytes)"}]


def test_three_bad_lines_in_a_row_terminate_with_validation_failure() -> None:
    proc = lw("replay", "--summary-json", "-", stdin=b"x\ny\nz\n" + b'{"type":"done"}\n')
    summary = json.loads(proc.stderr)
    assert summary["termination"] == "validation_failure" and summary["stopped_at"] == 3
    assert [v["action"] for v in verdicts(proc)] == ["nudge", "nudge", "terminate"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("replay", "/nonexistent/file.jsonl"),
         "loopwarden: error: cannot read /nonexistent/file.jsonl: No such file or directory"),
        (("replay", "--format", "gemini", "x"), "loopwarden: error: Invalid value for '--format'"),
        (("replay", "--set", "limits.max_runtime=soon", "-"),
         "loopwarden: error: limits.max_runtime: 'soon' is not valid"),
        (("replay",), "loopwarden: error: Missing argument 'FILE|-'"),
        (("nosuch",), "loopwarden: error: No such command 'nosuch'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = lw(*args, stdin=b"")
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert err.startswith(message), err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_directory_is_unreadable(tmp_path: Path) -> None:
    proc = lw("replay", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith(f"loopwarden: error: cannot read {tmp_path}")


# Tool calls counted by hand (jq over tool_use blocks; see tests/claude_code/test_stream_json.py).
@pytest.mark.parametrize(
    ("name", "fmt", "tool_calls", "tool_results"),
    [
        ("claude_stream-json__claude-clean__simple.jsonl", "claude-code", 21, 21),
        ("claude_stream-json__ccagent__claude_response1.jsonl", "claude-code", 53, 53),
        ("claude_stream-json__ccagent__claude-session-with-image.jsonl", "claude-code", 10, 10),
        ("codex_exec_json__agentcmd__stream-output-2.jsonl", "codex", 1, 1),
        ("codex_exec_json__agentcmd__stream-output-3.jsonl", "codex", 1, 1),
        ("codex_exec_json__agentcmd__stream-output-4.jsonl", "codex", 1, 1),
        ("codex_exec_json__agentcmd__stream-output-5.jsonl", "codex", 1, 1),
        ("codex_exec_json__openai-codex-docs__exec-md-sample.jsonl", "codex", 1, 1),
    ],
)
def test_real_transcripts_replay_with_hand_counted_tool_calls(name: str, fmt: str, tool_calls: int,
                                                              tool_results: int) -> None:
    proc = lw("replay", "--format", fmt, "--summary-json", "--no-spill", str(recording(name)))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stderr)
    assert summary["by_type"]["tool_call"] == tool_calls
    assert summary["by_type"]["tool_result"] == tool_results
    assert summary["validation_failures"] == 0
    assert summary["state"] != "terminated"


def test_the_long_real_session_is_not_blocked_for_lint_errors_it_fixed_one_by_one() -> None:
    """make lint-fix fails three times, each time with other compile errors the agent then fixes: the
    same make summary line is not the same error (it was blocked before issue 14: a false alarm)."""
    path = recording("claude_stream-json__ccagent__claude_response1.jsonl")
    proc = lw("replay", "--format", "claude-code", "--no-spill", str(path))
    assert proc.returncode == 0, proc.stderr
    assert verdicts(proc) == []


def test_a_claude_code_json_array_fixture_replays() -> None:
    path = DATA / "claude_turns_array__claude-code-action__sample-turns.json"
    proc = lw("replay", "--format", "claude-code", "--summary-json", "--no-spill", str(path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stderr)
    assert summary["by_type"]["tool_call"] == 3 and summary["validation_failures"] == 0


# ---- the format, told from the input ----------------------------------------

RECORDINGS = [
    ("claude_stream-json__claude-clean__simple.jsonl", "claude-code"),
    ("claude_stream-json__ccagent__claude_response1.jsonl", "claude-code"),
    ("claude_stream-json__ccagent__claude-session-with-image.jsonl", "claude-code"),
    ("claude_turns_array__claude-code-action__sample-turns.json", "claude-code"),
    ("codex_exec_json__agentcmd__stream-output-2.jsonl", "codex"),
    ("codex_exec_json__openai-codex-docs__exec-md-sample.jsonl", "codex"),
    ("tests/codex/data/app_server_looping.jsonl", "codex-app-server"),
    ("tests/acp/data/acp_looping.jsonl", "acp"),
    ("loopwarden/examples/demo.jsonl", "native"),
]


@pytest.mark.parametrize(("name", "fmt"), RECORDINGS)
def test_the_format_is_detected_and_judged_as_if_it_was_given(name: str, fmt: str) -> None:
    path = recording(name)
    detected = lw("replay", "--summary-json", "--no-spill", str(path))
    given = lw("replay", "--summary-json", "--no-spill", "--format", fmt, str(path))
    assert detected.returncode == given.returncode == 0, detected.stderr
    summary = json.loads(detected.stderr)
    assert (summary["format"], summary["detected"]) == (fmt, True)
    assert detected.stdout == given.stdout  # the same verdicts
    assert json.loads(given.stderr) == {**summary, "detected": False}


@pytest.mark.parametrize(("name", "fmt"), RECORDINGS)
def test_a_piped_recording_is_detected_and_read_whole(name: str, fmt: str) -> None:
    path = recording(name)
    piped = subprocess.run(f"cat {path} | {sys.executable} -m loopwarden replay --summary-json --no-spill -",
                           shell=True, capture_output=True, timeout=60, check=False)
    from_file = lw("replay", "--summary-json", "--no-spill", str(path))
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stderr)["format"] == fmt
    assert json.loads(piped.stderr) == json.loads(from_file.stderr) and piped.stdout == from_file.stdout


@pytest.mark.parametrize(("name", "likely"), RECORDINGS)
def test_a_wrong_format_is_an_error_naming_the_likely_one(name: str, likely: str) -> None:
    path = recording(name)
    wrong = "codex" if likely != "codex" else "claude-code"
    proc = lw("replay", "--format", wrong, str(path))
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode() == (f"loopwarden: error: {path} does not look like {wrong}; it looks like {likely} "
                                    f"(use --format {likely}, or leave --format out to detect it)\n")


def test_the_issue_case_claude_code_on_a_native_file_names_native() -> None:
    proc = lw("replay", "--format", "claude-code", "-", stdin=(ROOT / "loopwarden/examples/demo.jsonl").read_bytes())
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith("loopwarden: error: stdin does not look like claude-code; it looks like "
                                           "native (use --format native")


def test_input_that_fits_no_format_is_read_as_native_and_reported_line_by_line() -> None:
    proc = lw("replay", "--summary-json", "-", stdin=b"hello\nworld\n")
    summary = json.loads(proc.stderr)
    assert (summary["format"], summary["detected"]) == ("native", True)
    assert summary["validation_failures"] == 2 and summary["lines"] == 2


def test_a_given_format_that_fits_some_first_lines_is_kept() -> None:
    native_then_junk = b'{"type":"done"}\n' + b'{"type":"result"}\n' * 5  # mostly claude-code, but not plainly
    proc = lw("replay", "--summary-json", "--format", "native", "-", stdin=native_then_junk)
    assert proc.returncode == 0 and json.loads(proc.stderr)["format"] == "native"


# ---- lines read and ignored ---------------------------------------------------

def test_the_summary_counts_every_line_read_and_the_ignored_ones() -> None:
    stream = b"\n".join([
        b'{"type":"system","subtype":"init","session_id":"x"}',  # nothing to judge
        b"",
        b'{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}]}}',
        b"   ",
        b'{"type":"rate_limit_event"}',  # nothing to judge
        b'{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"bye"}]}}',
        b"",
        b"  ",
    ])  # 8 lines: the last one blank, with no newline of its own
    proc = lw("replay", "--summary-json", "-", stdin=stream)
    summary = json.loads(proc.stderr)
    assert (summary["format"], summary["lines"], summary["ignored"], summary["events"]) == ("claude-code", 8, 6, 2)
    text = lw("replay", "-", stdin=stream).stderr.decode()
    assert text.startswith("replay: claude-code (detected); 8 lines read, 6 ignored; 2 events (assistant_message 2)")


def test_a_session_that_ends_early_counts_the_lines_up_to_its_end() -> None:
    proc = lw("replay", "--summary-json", "-", stdin=b"\nx\ny\nz\n" + b'{"type":"done"}\n' * 5)
    summary = json.loads(proc.stderr)
    assert summary["stopped_at"] == 4 and summary["lines"] == 4 and summary["ignored"] == 1


def test_an_array_counts_records() -> None:
    path = recording("claude_turns_array__claude-code-action__sample-turns.json")
    text = lw("replay", "--no-spill", str(path)).stderr.decode()
    records = len(json.loads(path.read_bytes()))
    assert text.startswith(f"replay: claude-code (detected); {records} records read, 1 ignored; ")


def test_the_line_count_is_the_lines_read_not_the_last_events_number() -> None:
    path = recording("codex_exec_json__agentcmd__stream-output-2.jsonl")
    lines = path.read_bytes().count(b"\n")
    summary = json.loads(lw("replay", "--summary-json", str(path)).stderr)
    assert summary["lines"] == lines == 7 and summary["ignored"] == 3  # thread.started, turn.started, reasoning


@pytest.mark.parametrize(
    ("head", "fmt"),
    [
        (b'{"type":"error","message":"x"}\n' * 3, "native"),  # native's and codex's: native, the first format
        (b'{"type":"error","message":"x"}\n{"type":"turn.failed"}\n', "codex"),  # one line decides
        (b'{"id":1,"result":{}}\n{"method":"turn/started","params":{}}\n', "codex-app-server"),  # no JSON-RPC header
        (b'{"jsonrpc":"2.0","id":1,"result":{}}\n', "acp"),
        (b'{"method":"session/update","params":{}}\n', "acp"),
        (b'{"type":"stream_event","event":{}}\n', "claude-code"),
        (b'[{"type":"system"},{"type":"assistant","message":{}}]', "claude-code"),  # an array on one line
        (b"[1, 2]\n", None),  # a JSON-lines record that is not an object
        (b"", None),
    ],
)
def test_guess_format_from_the_first_lines(head: bytes, fmt: str | None) -> None:
    from loopwarden.sessions.formats import guess_format

    assert guess_format(head, complete=True).fmt == fmt


def test_a_line_cut_by_the_head_is_not_judged() -> None:
    from loopwarden.sessions.formats import guess_format

    assert guess_format(b'{"type":"tool_call","tool":"x","args":{}}\n{"type":"assistant","mess', complete=False).fmt \
        == "native"
