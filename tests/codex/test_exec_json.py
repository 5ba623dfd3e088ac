"""Codex `exec --json` adapter: real recordings and edge cases."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loopwarden.sessions.codex import CodexParser
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.lines import read_lines
from tests.support.paths import DATA, TRANSCRIPTS


# Hand counts: these files are 6-8 lines each and were read by eye (cat), cross-checked with
#   jq -c '[.type, .item.type, .item.id, .item.exit_code, .usage]' F
# Each has exactly one tool item, one agent_message and one turn.completed.
# Tuple: (records, tool, call_id, args, result seq, output, exit_code, message seq,
#         message start, input_tokens, output_tokens).
EXPECTED: dict[str, tuple] = {
    "codex_exec_json__agentcmd__stream-output-2.jsonl": (
        7, "shell", "item_1", {"command": "bash -lc ls"}, 5,
        "stream-output-1.jsonl\nstream-output-2.jsonl\ntest.js\n", 0, 6, "Files here:", 6040, 129,
    ),
    "codex_exec_json__agentcmd__stream-output-3.jsonl": (
        6, "apply_patch", "item_1",
        {"changes": [{"path": "/private/tmp/codex-research-test/hello.txt", "kind": "add"}]}, 4,
        "add /private/tmp/codex-research-test/hello.txt", None, 5, "Created `hello.txt`", 6008, 51,
    ),
    "codex_exec_json__agentcmd__stream-output-4.jsonl": (
        8, "shell", "item_1", {"command": "bash -lc 'cat test.js'"}, 5,
        "console.log('Hello World');\n", 0, 7, "`test.js` simply contains", 6087, 204,
    ),
    "codex_exec_json__agentcmd__stream-output-5.jsonl": (
        8, "shell", "item_1", {"command": "zsh -lc ls"}, 5,
        "/opt/homebrew/Library/Homebrew/cmd/shellenv.sh: line 18: /bin/ps: Operation not permitted\n"
        "hello.txt\nstream-output-1.jsonl\nstream-output-2.jsonl\nstream-output-3.jsonl\n"
        "stream-output-4.jsonl\nstream-output-5.jsonl\ntest.js\n", 0, 7, "Found 1 text file", 6086, 223,
    ),
    "codex_exec_json__openai-codex-docs__exec-md-sample.jsonl": (
        8, "shell", "item_1", {"command": "bash -lc ls"}, 5,
        None, 0, 7, "Yep — there’s a `README.md`", 24763, 122,  # noqa: RUF001 - the recorded text's own apostrophe
    ),
}


def _parse_file(path: Path) -> tuple[int, list[ev.Event]]:
    parser = CodexParser()
    out: list[ev.Event] = []
    records = 0
    with path.open("rb") as stream:
        for seq, line in read_lines(stream, max_bytes=64 << 20):
            records += 1
            out.extend(parser.parse_line(line, seq))
    return records, out


def _feed(*records: dict) -> list[ev.Event]:
    parser = CodexParser()
    return [e for seq, obj in enumerate(records, 1) for e in parser.feed(obj, seq)]


def _shape(events: list[ev.Event]) -> list[tuple[str, int]]:
    return [(type(e).__name__, e.seq) for e in events]


def test_every_shared_transcript_has_hand_counts() -> None:
    if not TRANSCRIPTS.exists():
        pytest.skip("transcripts folder not available")
    assert {p.name for p in TRANSCRIPTS.iterdir() if p.name.startswith("codex")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_local_copy_matches_shared(name: str) -> None:
    if not (TRANSCRIPTS / name).exists():
        pytest.skip("transcripts folder not available")
    assert (DATA / name).read_bytes() == (TRANSCRIPTS / name).read_bytes()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recording(name: str) -> None:
    (records, tool, call_id, args, result_seq, output, exit_code, msg_seq, msg_start,
     tokens_in, tokens_out) = EXPECTED[name]
    count, events = _parse_file(DATA / name)
    assert count == records
    call_seq = result_seq - 1 if tool == "shell" else result_seq  # file_change has no item.started
    assert _shape(events) == [
        ("ToolCall", call_seq), ("ToolResult", result_seq), ("AssistantMessage", msg_seq),
        ("Usage", records), ("Iteration", records),
    ]
    call, result, message, usage, iteration = events
    assert (call.tool, call.call_id, call.args) == (tool, call_id, args)
    assert (result.tool, result.call_id, result.exit_code, result.is_error) == (tool, call_id, exit_code, False)
    if output is not None:
        assert result.output == output
    else:
        assert result.output.startswith("2025-09-11\nAGENTS.md\n") and result.output.endswith("sdk\ntmp\n")
    assert message.text.startswith(msg_start)
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (tokens_in, tokens_out, None)
    assert (iteration.n, iteration.status, iteration.error) == (1, "pass", None)
    assert all(e.ts is None and e.agent is None for e in events)


def test_completed_without_started_emits_call_first() -> None:
    events = _feed({"type": "item.completed", "item": {
        "id": "item_9", "type": "command_execution", "command": "false",
        "aggregated_output": "", "exit_code": 1, "status": "failed"}})
    assert _shape(events) == [("ToolCall", 1), ("ToolResult", 1)]
    call, result = events
    assert (call.tool, call.args, call.call_id) == ("shell", {"command": "false"}, "item_9")
    assert (result.exit_code, result.is_error, result.failed) == (1, True, True)


@pytest.mark.parametrize("item, is_error", [
    ({"exit_code": 2, "status": "completed"}, True),  # non-zero exit even if status says completed
    ({"exit_code": None, "status": "failed"}, True),
    ({"status": "declined"}, True),  # sandbox refused: exit_code absent
    ({"exit_code": 0, "status": "completed"}, False),
    ({"exit_code": None, "status": "completed"}, False),
])
def test_command_failure_flags(item: dict, is_error: bool) -> None:
    started = {"id": "i", "type": "command_execution", "command": "x", "aggregated_output": "",
               "exit_code": None, "status": "in_progress"}  # 0.15x style: explicit null exit_code
    events = _feed({"type": "item.started", "item": started},
                   {"type": "item.completed", "item": {"id": "i", "type": "command_execution", **item}})
    assert _shape(events) == [("ToolCall", 1), ("ToolResult", 2)]
    assert events[1].is_error is is_error
    assert events[1].output == ""


def test_file_change_failed_and_multiple_changes() -> None:
    (call, result) = _feed({"type": "item.completed", "item": {"id": "f", "type": "file_change", "status": "failed",
                                                               "changes": [{"path": "a.py", "kind": "update"},
                                                                           {"path": "b.py", "kind": "delete"}]}})
    assert call.tool == "apply_patch" and len(call.args["changes"]) == 2
    assert (result.output, result.is_error) == ("update a.py\ndelete b.py", True)


def test_mcp_tool_call() -> None:
    item = {"id": "m1", "type": "mcp_tool_call", "server": "github", "tool": "get_issue",
            "arguments": {"number": 7}, "status": "in_progress"}
    done = {**item, "status": "completed", "result": {"content": [
        {"type": "text", "text": "line 1"}, {"type": "image", "data": "zzz"}, {"type": "text", "text": "line 2"}],
        "structured_content": None}}
    events = _feed({"type": "item.started", "item": item}, {"type": "item.completed", "item": done})
    assert _shape(events) == [("ToolCall", 1), ("ToolResult", 2)]
    call, result = events
    assert (call.tool, call.args, call.call_id) == ("github.get_issue", {"number": 7}, "m1")
    assert (result.tool, result.output, result.is_error) == ("github.get_issue", "line 1\nline 2", False)


def test_mcp_error_completed_only() -> None:
    events = _feed({"type": "item.completed", "item": {
        "id": "m2", "type": "mcp_tool_call", "server": "fs", "tool": "read", "arguments": "not a dict",
        "status": "failed", "error": {"message": "no such file"}}})
    call, result = events
    assert (call.tool, call.args) == ("fs.read", {"arguments": "not a dict"})
    assert (result.output, result.is_error) == ("no such file", True)


def test_web_search_maps_to_tool_call() -> None:
    events = _feed({"type": "item.completed", "item": {"id": "w", "type": "web_search", "query": "orjson"}})
    assert [(type(e).__name__, e.tool) for e in events] == [("ToolCall", "web_search"), ("ToolResult", "web_search")]
    assert events[0].args == {"query": "orjson"} and events[1].output == ""


def test_ignored_items_and_types() -> None:
    events = _feed(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "r", "type": "reasoning", "text": "hm"}},
        {"type": "item.started", "item": {"id": "p", "type": "todo_list", "items": []}},
        {"type": "item.updated", "item": {"id": "p", "type": "todo_list", "items": [{"text": "a"}]}},
        {"type": "item.completed", "item": {"id": "q", "type": "plan", "text": "plan"}},
        {"type": "item.started", "item": {"id": "a", "type": "agent_message", "text": "partial"}},
        {"type": "item.plan.delta", "item_id": "q", "delta": "x"},
        {"type": "something.new", "payload": 1},
    )
    assert events == []


def test_turns_failures_and_errors() -> None:
    events = _feed(
        {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 4, "output_tokens": 3}},
        {"type": "error", "message": "Reconnecting... 1/5"},
        {"type": "error", "message": "stream disconnected before completion"},
        {"type": "turn.failed", "error": {"message": "quota exceeded"}},
        {"type": "turn.completed"},
        {"type": "turn.failed"},
    )
    assert _shape(events) == [
        ("Usage", 1), ("Iteration", 1), ("Error", 3), ("Error", 4), ("Iteration", 4),
        ("Usage", 5), ("Iteration", 5), ("Error", 6), ("Iteration", 6),
    ]
    assert (events[0].input_tokens, events[0].output_tokens) == (10, 3)  # cached is already inside input
    assert events[2].message == "stream disconnected before completion"
    assert [(i.n, i.status, i.error) for i in events if isinstance(i, ev.Iteration)] == [
        (1, "pass", None), (2, "fail", "quota exceeded"), (3, "pass", None), (4, "fail", "turn failed"),
    ]
    assert (events[5].input_tokens, events[5].output_tokens) == (0, 0)


@pytest.mark.parametrize("raw, reason", [
    (b"{not json", "not valid JSON"),
    (b"42", "not a JSON object (got int)"),
    (b'{"item": {}}', "missing 'type'"),
    (b'{"type": "item.completed", "item": [1]}', "item.completed: 'item' must be an object"),
])
def test_invalid_lines(raw: bytes, reason: str) -> None:
    (bad,) = CodexParser().parse_line(raw, 5)
    assert isinstance(bad, ev.InvalidLine) and bad.reason.startswith(reason)
    assert bad.seq == 5 and bad.preview


def test_feed_rejects_non_objects() -> None:
    (bad,) = CodexParser().feed("x", 2)  # type: ignore[arg-type]
    assert isinstance(bad, ev.InvalidLine) and bad.reason == "not a JSON object (got str)"


def test_parse_line_round_trip() -> None:
    line = orjson.dumps({"type": "item.completed", "item": {"id": "a", "type": "agent_message", "text": "hi"}})
    (msg,) = CodexParser().parse_line(line, 3)
    assert isinstance(msg, ev.AssistantMessage) and (msg.text, msg.seq) == ("hi", 3)


@pytest.mark.parametrize("depth", [4, 64, 65, 250, 1024, 1025])
def test_an_mcp_call_line_nests_at_most_max_depth(depth: int) -> None:
    from loopwarden.supervisor.bounds import MAX_DEPTH, TOO_DEEP

    # the line (1) > item (2) > arguments (3...): arguments nest depth - 2 levels
    arguments = b'{"a":' * (depth - 3) + b"{}" + b"}" * (depth - 3)
    line = b'{"type":"item.started","item":{"id":"i1","type":"mcp_tool_call","server":"s","tool":"t","arguments":' \
        + arguments + b"}}"
    (event,) = CodexParser().parse_line(line, 3)
    if depth <= MAX_DEPTH:
        assert isinstance(event, ev.ToolCall) and event.args == orjson.loads(arguments)
    else:
        assert isinstance(event, ev.InvalidLine) and event.reason == TOO_DEEP
