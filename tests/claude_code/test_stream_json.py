"""Claude Code stream-json adapter: real recordings and edge cases."""

from __future__ import annotations

import io
from collections import Counter
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import orjson
import pytest

from loopwarden.sessions.claude_code import ClaudeCodeParser, parse_array
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.lines import Oversized, read_lines
from tests.support.paths import DATA, TRANSCRIPTS, recording


SIMPLE = "claude_stream-json__claude-clean__simple.jsonl"
RESPONSE1 = "claude_stream-json__ccagent__claude_response1.jsonl"
IMAGE = "claude_stream-json__ccagent__claude-session-with-image.jsonl"
ARRAY = "claude_turns_array__claude-code-action__sample-turns.json"
SUB_EXPLORE = "toolu_014ZNMnsnumfmXfL43RcsT8z"  # Task "Explore codebase structure"
SUB_TESTS = "toolu_01Xnzv79g9egnUYoGxEL9fir"  # Task "Find test files"

# Hand counts, made with jq on the raw files (never with this parser), e.g.
#   calls:    jq -r 'select(.type=="assistant")|.message.content[]|select(.type=="tool_use")|.name' F | sort | uniq -c
#   results:  jq -c 'select(.type=="user")|.message.content[]|select(.type=="tool_result")' F | wc -l
#   errors:   jq -c '...|select(.type=="tool_result")|select(.is_error==true)' F | wc -l;  grep -n '"is_error":true' F
#   messages: jq -r 'select(.type=="assistant")|select(any(.message.content[];.type=="text"))|.message.id' F
#             | sort -u | wc -l
#             (every text line has its own message id in these recordings)
#   tokens:   jq -c 'select(.type=="result")|.usage' F, then input + cache_creation + cache_read by hand
#   records:  grep -c . F   (non-blank lines)
#   ids:      comm -13 on sorted tool_use ids vs tool_result tool_use_ids -> 0 results without a call
EXPECTED: dict[str, dict] = {
    SIMPLE: {
        "records": 47,
        "calls": {"Bash": 3, "Glob": 6, "Grep": 2, "Read": 5, "Task": 2, "TodoWrite": 2, "WebSearch": 1},
        "results": 21,
        "messages": 3,
        "error_seqs": [15],
        "error_tools": {"Read": 1},
        "input_tokens": 16 + 11907 + 58826,
        "output_tokens": 956,
        "cost": 0.21085415,
        "first_call": (3, "Glob", "toolu_01VdNvyRGtzZvniXJGQQjvEP", {"pattern": "**/*.go"}),
        "first_message": (2, "I'll run a comprehensive diagnostic using all the requested tools."),
    },
    RESPONSE1: {
        "records": 141,  # plus one trailing blank line (142 lines)
        "calls": {"Bash": 8, "Edit": 18, "Grep": 6, "LS": 1, "Read": 11, "TodoWrite": 7, "Write": 2},
        "results": 53,
        "messages": 33,
        "error_seqs": [25, 64, 74, 87, 106, 112, 136],
        "error_tools": {"Bash": 5, "Edit": 2},
        "input_tokens": 193 + 118318 + 4940732,
        "output_tokens": 35620,
        "cost": 2.4637934999999995,
        "first_call": (3, "TodoWrite", "toolu_01TqDWAeK2YQp7wGJJwEG71K", None),
        "first_message": (2, None),
    },
    IMAGE: {
        "records": 26,  # 25 newlines: the last record has none
        "calls": {"Bash": 2, "Edit": 2, "Read": 2, "TodoWrite": 4},
        "results": 10,
        "messages": 4,
        "error_seqs": [],
        "error_tools": {},
        "input_tokens": 48 + 14512 + 750196,
        "output_tokens": 4371,
        "cost": 0.3451878,
        "first_call": (
            2, "Read", "toolu_0151BtS51EMMibnj937P8EWq",
            {"file_path": "/tmp/eksecd/attachments/job_j_01K87V9VG4ZSF2KCWD8AYZ5W6V/attachment_0.png"},
        ),
        "first_message": (10, "Now I'll update the BlueSky section to display posts in a 2-column grid"),
    },
}


def _shared(name: str) -> Path:
    path = TRANSCRIPTS / name
    if not path.exists():
        pytest.skip(f"recording {name} not available")
    return path


@cache
def _parse(name: str) -> tuple[int, tuple[ev.Event, ...]]:
    """(records read, events) for one shared recording, parsed once per session."""
    parser = ClaudeCodeParser()
    out: list[ev.Event] = []
    records = 0
    with recording(name).open("rb") as stream:
        for seq, line in read_lines(stream, max_bytes=64 << 20):
            assert not isinstance(line, Oversized)
            records += 1
            out.extend(parser.parse_line(line, seq))
    return records, tuple(out)


def _of(events, cls):  # type: ignore[no-untyped-def]
    return [e for e in events if isinstance(e, cls)]


def _line(obj: dict) -> bytes:
    return orjson.dumps(obj)


def test_every_shared_transcript_has_hand_counts() -> None:
    if not TRANSCRIPTS.exists():
        pytest.skip("transcripts folder not available")
    names = {p.name for p in TRANSCRIPTS.iterdir() if p.name.startswith("claude")}
    assert names == set(EXPECTED) | {ARRAY}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recording_counts(name: str) -> None:
    want = EXPECTED[name]
    records, events = _parse(name)
    assert records == want["records"]
    assert not _of(events, ev.InvalidLine)
    assert not _of(events, ev.UserMessage)  # every user line is a tool_result
    calls, results = _of(events, ev.ToolCall), _of(events, ev.ToolResult)
    assert Counter(c.tool for c in calls) == want["calls"]
    assert len(results) == want["results"] == len(calls)
    # Every result names the tool of its call, so per-tool counts match.
    assert Counter(r.tool for r in results) == want["calls"]
    assert {r.call_id for r in results} == {c.call_id for c in calls}
    assert len(_of(events, ev.AssistantMessage)) == want["messages"]
    errors = [r for r in results if r.is_error]
    assert [r.seq for r in errors] == want["error_seqs"]
    assert Counter(r.tool for r in errors) == want["error_tools"]
    assert all(r.exit_code is None for r in results)
    # each API message's usage comes provisionally as it arrives; the result's is the turn's own
    *_, usage = _of(events, ev.Usage)
    assert all(u.cost_source == "provisional" for u in _of(events, ev.Usage)[:-1]) and usage.cost_source == "turn"
    assert (usage.input_tokens, usage.output_tokens) == (want["input_tokens"], want["output_tokens"])
    assert usage.cost_usd == pytest.approx(want["cost"])
    (iteration,) = _of(events, ev.Iteration)
    assert (iteration.n, iteration.status, iteration.error) == (1, "pass", None)
    assert iteration.seq == usage.seq == want["records"]
    assert all(e.ts is None for e in events)  # these versions send no timestamp
    seq, tool, call_id, args = want["first_call"]
    first = calls[0]
    assert (first.seq, first.tool, first.call_id) == (seq, tool, call_id)
    if args is not None:
        assert first.args == args
    seq, text = want["first_message"]
    message = _of(events, ev.AssistantMessage)[0]
    assert message.seq == seq
    if text is not None:
        assert message.text.startswith(text)


def test_response1_repetition_facts() -> None:
    # README: "11 Edit calls to the same file and `make lint-fix` run 3 times".
    # grep -o '"command":"make lint-fix"' F | wc -l  gives 4 (lines 73, 86, 105, 132), not 3.
    calls = _of(_parse(RESPONSE1)[1], ev.ToolCall)
    edits = Counter(c.args["file_path"] for c in calls if c.tool == "Edit")
    assert edits.most_common(1) == [("/Users/pmihaylov/prg/ccpg/cc1/ccbackend/services/agents_test.go", 11)]
    lint = [c.seq for c in calls if c.tool == "Bash" and c.args["command"] == "make lint-fix"]
    assert lint == [73, 86, 105, 132]


def test_simple_sub_agents_keep_parent_id() -> None:
    events = _parse(SIMPLE)[1]
    by_agent = Counter((type(e).__name__, e.agent) for e in events if e.agent is not None)
    by_agent = Counter({k: n for k, n in by_agent.items() if k[0] != "Usage"})  # their calls, billed as they come
    assert by_agent == {
        ("ToolCall", SUB_EXPLORE): 7, ("ToolResult", SUB_EXPLORE): 7,
        ("ToolCall", SUB_TESTS): 6, ("ToolResult", SUB_TESTS): 6,
    }
    tasks = [c for c in _of(events, ev.ToolCall) if c.tool == "Task"]
    assert {t.call_id for t in tasks} == {SUB_EXPLORE, SUB_TESTS}
    assert all(t.agent is None for t in tasks)
    (failed,) = [r for r in _of(events, ev.ToolResult) if r.is_error]
    assert failed.agent == SUB_EXPLORE
    assert failed.output == "EISDIR: illegal operation on a directory, read"
    # The Task results are lists of text blocks, joined into plain text.
    task_results = [r for r in _of(events, ev.ToolResult) if r.tool == "Task"]
    assert len(task_results) == 2
    assert task_results[0].output.startswith("## File Locations for Test Files")


def test_image_tool_result_becomes_placeholder() -> None:
    events = _parse(IMAGE)[1]
    # Line 3 is 1,135,451 bytes; jq '.source.data|length' on its image block gives 1135112.
    result = _of(events, ev.ToolResult)[0]
    assert (result.seq, result.tool, result.call_id) == (3, "Read", "toolu_0151BtS51EMMibnj937P8EWq")
    assert result.output == "[image: image/png, 1135112 bytes base64]"
    assert result.is_error is False  # is_error is absent on this block
    assert max(len(r.output) for r in _of(events, ev.ToolResult)) < 20_000


def test_cost_increments_sum_to_total() -> None:
    parser = ClaudeCodeParser()
    events = []
    for seq, total in enumerate([0.5, 1.25, 1.25, 2.0], 1):
        events += parser.feed({"type": "result", "subtype": "success", "total_cost_usd": total}, seq)
    costs = [u.cost_usd for u in _of(events, ev.Usage)]
    assert costs == pytest.approx([0.5, 0.75, 0.0, 0.75])
    assert sum(costs) == pytest.approx(2.0)
    assert [i.n for i in _of(events, ev.Iteration)] == [1, 2, 3, 4]


def test_legacy_cost_field_and_missing_fields() -> None:
    parser = ClaudeCodeParser()
    usage, iteration = parser.feed({"type": "result"}, 1)
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (0, 0, None)
    assert (iteration.n, iteration.status) == (1, "pass")
    usage, _ = parser.feed({"type": "result", "cost_usd": 0.25, "usage": "junk"}, 2)
    assert usage.cost_usd == 0.25


def test_error_results_fail() -> None:
    parser = ClaudeCodeParser()
    _, it1 = parser.feed({
        "type": "result", "subtype": "error_max_turns", "is_error": True,
        "errors": ["Reached maximum number of turns (1)"],
    }, 1)
    assert (it1.status, it1.error) == ("fail", "Reached maximum number of turns (1)")
    _, it2 = parser.feed({"type": "result", "subtype": "success", "is_error": True, "result": "API Error: 500"}, 2)
    assert (it2.n, it2.status, it2.error) == (2, "fail", "API Error: 500")
    _, it3 = parser.feed({"type": "result", "subtype": "error_during_execution", "is_error": False}, 3)
    assert (it3.status, it3.error) == ("fail", "error_during_execution")


def test_missing_is_error_is_false() -> None:
    parser = ClaudeCodeParser()
    line = _line({"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "bad", "is_error": True},
        {"type": "tool_result", "tool_use_id": "t3", "content": None, "is_error": None},
    ]}})
    results = parser.parse_line(line, 7)
    assert [(r.call_id, r.is_error, r.output, r.seq) for r in results] == [
        ("t1", False, "ok", 7), ("t2", True, "bad", 7), ("t3", False, "", 7),
    ]
    assert all(r.tool is None for r in results)  # no earlier tool_use for these ids


def test_one_assistant_message_per_message_id() -> None:
    parser = ClaudeCodeParser()

    def block(msg_id: str, *blocks: dict) -> dict:
        return {"type": "assistant", "message": {"id": msg_id, "content": list(blocks)}, "parent_tool_use_id": None}

    text = {"type": "text", "text": "hello"}
    events = parser.feed(block("m1", {"type": "thinking", "thinking": "hm", "signature": "x"}), 1)
    events += parser.feed(block("m1", text), 2)
    events += parser.feed(block("m1", {"type": "text", "text": "more"}), 3)
    events += parser.feed(block("m1", {"type": "tool_use", "id": "c1", "name": "Bash", "input": {}}), 4)
    again = {"type": "text", "text": "again"}
    read = {"type": "tool_use", "id": "c2", "name": "Read", "input": "raw"}
    events += parser.feed(block("m2", text, again, read), 5)
    kinds = [(type(e).__name__, e.seq) for e in events]
    assert kinds == [("AssistantMessage", 2), ("ToolCall", 4), ("AssistantMessage", 5), ("ToolCall", 5)]
    assert events[0].text == "hello" and events[0].agent is None
    assert events[3].args == {"input": "raw"}


def test_sub_agent_and_timestamp() -> None:
    parser = ClaudeCodeParser()
    (call,) = parser.feed({
        "type": "assistant", "parent_tool_use_id": "toolu_task", "timestamp": "2026-11-22T02:07:55.077Z",
        "message": {"id": "m", "content": [{"type": "tool_use", "id": "c", "name": "Grep", "input": {}}]},
    }, 4)
    assert call.agent == "toolu_task"
    assert call.ts == datetime(2026, 11, 22, 2, 7, 55, 77000, tzinfo=UTC).timestamp()
    (result,) = parser.feed({
        "type": "user", "parent_tool_use_id": "toolu_task", "timestamp": "yesterday",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "c", "content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]},
    }, 5)
    assert (result.agent, result.tool, result.output, result.ts) == ("toolu_task", "Grep", "a\nb", None)


def test_user_prompts() -> None:
    parser = ClaudeCodeParser()
    (first,) = parser.feed({"type": "user", "message": {"role": "user", "content": "fix the bug"}}, 1)
    assert isinstance(first, ev.UserMessage) and first.text == "fix the bug"
    parser.feed({"type": "assistant", "message": {"id": "m", "content": [{"type": "text", "text": "ok"}]}}, 2)
    # A later plain prompt (e.g. a sub-agent's Task prompt) is not a human turn ...
    assert parser.feed({"type": "user", "message": {"content": "sub-agent prompt"}}, 3) == []
    # ... unless the CLI replays it (--replay-user-messages).
    (replay,) = parser.feed({"type": "user", "isReplay": True, "message": {"content": [
        {"type": "text", "text": "next"}]}}, 4)
    assert isinstance(replay, ev.UserMessage) and replay.text == "next"


def test_call_map_is_bounded() -> None:
    parser = ClaudeCodeParser()
    for i in range(5000):
        parser.feed({"type": "assistant", "message": {"id": f"m{i}", "content": [
            {"type": "tool_use", "id": f"c{i}", "name": "Bash", "input": {}}]}}, i + 1)

    def tool_of(call_id: str) -> str | None:
        (result,) = parser.feed({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": ""}]}}, 9999)
        return result.tool

    assert tool_of("c0") is None
    assert tool_of("c4999") == "Bash"


@pytest.mark.parametrize("raw, reason", [
    (b"not json", "not valid JSON"),
    (b"[1, 2]", "not a JSON object (got list)"),
    (b'"text"', "not a JSON object (got str)"),
    (b'{"no_type": 1}', "missing 'type'"),
    (b'{"type": 3}', "missing 'type'"),
    (b'{"type": "assistant", "message": "x"}', "assistant: 'message' must be an object"),
])
def test_invalid_lines(raw: bytes, reason: str) -> None:
    (bad,) = ClaudeCodeParser().parse_line(raw, 12)
    assert isinstance(bad, ev.InvalidLine)
    assert bad.reason.startswith(reason)
    assert bad.seq == 12 and bad.preview


def test_feed_rejects_non_objects() -> None:
    (bad,) = ClaudeCodeParser().feed(["a"], 3)  # type: ignore[arg-type]
    assert isinstance(bad, ev.InvalidLine) and bad.reason == "not a JSON object (got list)"


@pytest.mark.parametrize("kind", [
    "system", "rate_limit_event", "stream_event", "control_request", "control_response",
    "control_cancel_request", "conversation_reset", "something_new",
])
def test_other_types_are_ignored(kind: str) -> None:
    assert ClaudeCodeParser().parse_line(_line({"type": kind, "subtype": "x", "event": {}}), 1) == []


def test_assistant_error_field() -> None:
    events = ClaudeCodeParser().feed({"type": "assistant", "error": "rate_limit", "message": {
        "id": "m", "content": [{"type": "text", "text": "API Error: rate limited"}]}}, 1)
    assert [type(e).__name__ for e in events] == ["AssistantMessage", "Error"]
    assert events[1].error_type == "rate_limit"


def test_json_array_fixture() -> None:
    # sample-turns.json: 9 elements; assistant at 2, 4, 6, 8 (each text + tool_use except 8),
    # user tool_results at 3, 5, 7, result (no subtype, total_cost_usd 0.0347, no usage) at 9.
    events = parse_array((DATA / ARRAY).read_bytes())
    summary = [(type(e).__name__, e.seq) for e in events if getattr(e, "cost_source", None) != "provisional"]
    assert summary == [
        ("AssistantMessage", 2), ("ToolCall", 2), ("ToolResult", 3),
        ("AssistantMessage", 4), ("ToolCall", 4), ("ToolResult", 5),
        ("AssistantMessage", 6), ("ToolCall", 6), ("ToolResult", 7),
        ("AssistantMessage", 8), ("Usage", 9), ("Iteration", 9),
    ]
    calls = _of(events, ev.ToolCall)
    assert [c.tool for c in calls] == ["Read", "Edit", "mcp__github__add_pull_request_review_comment"]
    assert [r.tool for r in _of(events, ev.ToolResult)] == [c.tool for c in calls]
    assert calls[0].args == {"file_path": "/path/to/sample/file.py"}
    usage, iteration = events[-2:]
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (0, 0, 0.0347)
    assert iteration.status == "pass"


def test_array_fixture_matches_shared_copy() -> None:
    assert (DATA / ARRAY).read_bytes() == _shared(ARRAY).read_bytes()


@pytest.mark.parametrize("data, reason", [(b"{", "not valid JSON"), (b"{}", "not a JSON array")])
def test_parse_array_rejects(data: bytes, reason: str) -> None:
    (bad,) = parse_array(data)
    assert isinstance(bad, ev.InvalidLine) and bad.reason.startswith(reason)


def test_stream_without_trailing_newline() -> None:
    raw = _line({"type": "result", "subtype": "success", "total_cost_usd": 1.0}) + b"\n\n" + _line(
        {"type": "result", "subtype": "success", "total_cost_usd": 3.0})
    parser = ClaudeCodeParser()
    events = [e for seq, line in read_lines(io.BytesIO(raw)) for e in parser.parse_line(line, seq)]
    shape = [(type(e).__name__, e.seq) for e in events]
    assert shape == [("Usage", 1), ("Iteration", 1), ("Usage", 3), ("Iteration", 3)]
    assert sum(u.cost_usd for u in _of(events, ev.Usage)) == pytest.approx(3.0)


def _tool_use_line(depth: int) -> bytes:
    """An assistant line nesting `depth` levels: line > message > content > block > input (5...)."""
    levels = depth - 4
    tool_input = b'{"a":' * (levels - 1) + b"{}" + b"}" * (levels - 1)
    return (b'{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash",'
            b'"input":' + tool_input + b"}]}}")


@pytest.mark.parametrize("depth", [5, 64, 65, 250, 1024, 1025])
def test_a_recorded_line_nests_at_most_max_depth(depth: int) -> None:
    from loopwarden.supervisor.bounds import MAX_DEPTH, TOO_DEEP

    (event,) = ClaudeCodeParser().parse_line(_tool_use_line(depth), 4)
    if depth <= MAX_DEPTH:
        assert isinstance(event, ev.ToolCall) and event.call_id == "t1"
    else:
        assert isinstance(event, ev.InvalidLine) and event.reason == TOO_DEEP


def test_a_json_array_bounds_each_record_as_a_line() -> None:
    from loopwarden.supervisor.bounds import MAX_DEPTH, TOO_DEEP

    for inside, depth in ((True, MAX_DEPTH), (False, MAX_DEPTH + 1), (False, 1023)):
        (event,) = parse_array(b"[" + _tool_use_line(depth) + b"]")
        assert isinstance(event, ev.ToolCall) is inside
        assert inside or (event.reason, event.seq) == (TOO_DEEP, 1)  # type: ignore[attr-defined]
    (event,) = parse_array(b"[" + _tool_use_line(1024) + b"]")  # 1025 with the array: past what orjson reads
    assert isinstance(event, ev.InvalidLine) and event.reason == TOO_DEEP
