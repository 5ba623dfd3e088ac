"""The acp adapter without a process: launching words, the start, answers by option kind, what is owed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.sessions import registry
from loopwarden.sessions.acp import AcpAdapter, AcpParser, choose
from loopwarden.sessions.acp_programs import launch_command, split_words
from loopwarden.sessions.base import capability_names
from loopwarden.supervisor import events as ev
from loopwarden.supervisor import messages
from loopwarden.supervisor.verdicts import Action, Verdict
from tests.support.jsonl import json_lines


def test_the_first_double_dash_splits_the_agent_from_the_prompt() -> None:
    assert split_words(["gemini", "--acp", "--", "fix", "--", "it"]) == (["gemini", "--acp"], "fix -- it")
    assert launch_command(["opencode", "acp", "--", "go"]) == ["opencode", "acp", "--", "go"]


@pytest.mark.parametrize("words, error", [
    ([], "no ACP agent command"),
    (["--", "go"], "no ACP agent command"),
    (["gemini", "--acp"], "no prompt"),
    (["gemini", "--acp", "--", " "], "no prompt"),
])
def test_unusable_words_are_one_line_errors(words: list[str], error: str) -> None:
    with pytest.raises(ValueError, match=error) as info:
        launch_command(words)
    assert "\n" not in str(info.value)


def test_registered_with_its_capabilities() -> None:
    cls = registry.adapters()["acp"]
    assert cls is AcpAdapter and cls.agent == "acp"
    assert capability_names(cls().capabilities) == ["veto", "hold", "inject", "interrupt"]


def test_options_are_chosen_by_kind_never_always() -> None:
    options = [{"optionId": "proceed_always", "kind": "allow_always"},
               {"optionId": "proceed_once", "kind": "allow_once"},
               {"optionId": "cancel", "kind": "reject_once"}]
    assert choose(options, "allow_once") == "proceed_once"
    assert choose(options, "reject_once") == "cancel"
    assert choose(options[:1], "allow_once") is None
    assert choose("garbage", "allow_once") is None


def started() -> AcpAdapter:
    adapter = AcpAdapter()
    adapter.cwd = "/w"
    assert adapter.command(["agent", "--acp", "--", "go"]) == ["agent", "--acp"]
    init = json_lines(b"".join(adapter.start_lines()))[0]
    assert init["method"] == "initialize" and init["params"]["protocolVersion"] == 1  # type: ignore[index]
    assert init["params"]["clientCapabilities"] == {  # type: ignore[index]
        "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    adapter.parse_stdout(json.dumps({"jsonrpc": "2.0", "id": init["id"], "result": {"protocolVersion": 1}}).encode(), 1)
    new = json_lines(b"".join(adapter.replies(False)))[0]
    assert new["method"] == "session/new" and new["params"] == {"cwd": "/w", "mcpServers": []}
    events = adapter.parse_stdout(json.dumps({"id": new["id"], "result": {"sessionId": "s1"}}).encode(), 2)
    assert [type(e) for e in events] == [ev.UserMessage]
    prompt = json_lines(b"".join(adapter.replies(False)))[0]
    assert prompt["method"] == "session/prompt"
    assert prompt["params"] == {"sessionId": "s1", "prompt": [{"type": "text", "text": "go"}]}
    return adapter


def permission(adapter: AcpAdapter, request_id: int, seq: int) -> ev.ToolCall:
    msg = {"jsonrpc": "2.0", "id": request_id, "method": "session/request_permission",
           "params": {"sessionId": "s1", "toolCall": {"toolCallId": f"c{request_id}", "title": "rm -rf x",
                                                      "kind": "execute"},
                      "options": [{"optionId": "a!", "kind": "allow_always"},
                                  {"optionId": "r!", "kind": "reject_always"},
                                  {"optionId": "a", "kind": "allow_once"}, {"optionId": "r", "kind": "reject_once"}]}}
    [call] = adapter.parse_stdout(json.dumps(msg).encode(), seq)
    assert isinstance(call, ev.ToolCall) and call.args == {"title": "rm -rf x"} and call.tool == "execute"
    return call


def test_a_block_rejects_once_and_its_reason_is_the_next_prompt() -> None:
    adapter = started()
    call = permission(adapter, 5, 3)
    block = Verdict(action=Action.BLOCK, rule="repetition", reason="loop", message="REASON-1")
    assert json_lines(adapter.verdict_line(call, block)) == [
        {"jsonrpc": "2.0", "id": 5, "result": {"outcome": {"outcome": "selected", "optionId": "r"}}}]
    assert adapter.replies(False) == []  # the turn still runs
    adapter.parse_stdout(b'{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}', 4)
    nxt = json_lines(b"".join(adapter.replies(False)))[0]
    assert "REASON-1" in nxt["params"]["prompt"][0]["text"]  # type: ignore[index]


def test_stop_cancels_and_answers_every_pending_request_cancelled() -> None:
    adapter = started()
    permission(adapter, 5, 3)
    permission(adapter, 6, 4)
    sent = json_lines(adapter.stop_line("operator", "stop"))
    assert sent[0] == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    assert [(m["id"], m["result"]) for m in sent[1:]] == [(5, {"outcome": {"outcome": "cancelled"}}),
                                                         (6, {"outcome": {"outcome": "cancelled"}})]


def test_a_finished_turn_with_nothing_owed_closes_stdin() -> None:
    adapter = started()
    events = adapter.parse_stdout(b'{"jsonrpc":"2.0","id":3,"result":{"stopReason":"max_tokens"}}', 3)
    assert [e.status for e in events if isinstance(e, ev.Iteration)] == ["fail"]
    assert adapter.replies(False) == [b""]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_read_without_raising_and_answered_at_most_once(data: bytes) -> None:
    adapter = started()
    adapter.parse_stdout(data, 9)
    assert len(adapter.replies(False)) <= 2


def upd(**update: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "session/update",
                       "params": {"sessionId": "s1", "update": update}}).encode()


def test_claude_shape_the_update_brings_the_raw_input_the_request_only_a_title() -> None:
    parser = AcpParser()
    assert parser.parse_line(upd(sessionUpdate="tool_call", toolCallId="c1", title="`ls`", kind="execute",
                                 status="pending", rawInput={"command": "ls"}), 1) == []
    request = {"jsonrpc": "2.0", "id": 0, "method": "session/request_permission",
               "params": {"toolCall": {"toolCallId": "c1", "title": "`ls`"}, "options": []}}
    [call] = parser.parse_line(json.dumps(request).encode(), 2)
    assert isinstance(call, ev.ToolCall) and (call.tool, call.args) == ("execute", {"command": "ls"})
    [result] = parser.parse_line(upd(sessionUpdate="tool_call_update", toolCallId="c1", status="completed",
                                     rawOutput={"stdout": "a"}), 3)
    assert isinstance(result, ev.ToolResult) and result.output == '{"stdout":"a"}' and result.call_id == "c1"


def test_gemini_shape_a_request_with_no_update_before_and_a_call_never_asked_about() -> None:
    parser = AcpParser()
    request = {"jsonrpc": "2.0", "id": 3, "method": "session/request_permission",
               "params": {"toolCall": {"toolCallId": "g1", "title": "rm x", "kind": "execute"}, "options": []}}
    [call] = parser.parse_line(json.dumps(request).encode(), 1)
    assert isinstance(call, ev.ToolCall) and call.args == {"title": "rm x"}
    assert parser.parse_line(upd(sessionUpdate="tool_call", toolCallId="r1", title="ReadFile a.txt", kind="read",
                                 status="in_progress"), 2) == []
    events = parser.parse_line(upd(sessionUpdate="tool_call_update", toolCallId="r1", status="completed",
                                   content=[{"type": "content", "content": {"type": "text", "text": "hi"}}]), 3)
    assert [(type(e).__name__, getattr(e, "call_id", None)) for e in events] == [("ToolCall", "r1"),
                                                                                   ("ToolResult", "r1")]
    assert isinstance(events[0], ev.ToolCall) and events[0].args == {"title": "ReadFile a.txt"}


def test_claude_acp_a_fenced_result_is_its_content_not_the_fence() -> None:
    parser = AcpParser()
    parser.parse_line(upd(sessionUpdate="tool_call", toolCallId="c2", title="`pytest`", kind="execute",
                          status="pending", rawInput={"command": "pytest"}), 1)

    def result(call_id: str, text: str) -> ev.ToolResult:
        [call, done] = parser.parse_line(upd(sessionUpdate="tool_call_update", toolCallId=call_id, status="failed",
                                             content=[{"type": "content", "content": {"type": "text", "text": text}}]),
                                         2)
        assert isinstance(call, ev.ToolCall) and isinstance(done, ev.ToolResult)
        return done

    done = result("c2", "```console\nFAILED tests/test_a.py::test_x\n1 failed in 0.1s\n```")
    assert done.output == "FAILED tests/test_a.py::test_x\n1 failed in 0.1s" and done.failed
    assert messages.outcome(done.output, True) == "error: FAILED tests/test_a.py::test_x"
    assert result("c3", "```\ncut short").output == "cut short"  # a fence never closed (a clipped output)
    assert result("c4", "see ```x``` here").output == "see ```x``` here"  # not a fenced block: as it is


def test_a_fenced_result_of_blank_lines_or_unclosed_is_read_in_linear_time() -> None:
    # an open fence then 200k new lines took ~40 s of CPU with a lazy pattern anchored at the end
    import time

    from loopwarden.sessions.acp import content_text
    for text in ("```console\n" + "\n" * 200_000 + "x", "```console\n" + "a\n```x" * 40_000, "```" + "a" * 200_000):
        start = time.process_time()
        content_text([{"type": "content", "content": {"type": "text", "text": text}}])
        assert time.process_time() - start < 3.0
    assert content_text([{"type": "content", "content": {"type": "text", "text": "```\n```"}}]) == ""
