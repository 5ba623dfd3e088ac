"""The acp adapter's memory for a later daemon (`memory`, `recall`, `reread`) without a process: through JSON as the
store keeps it, with values of the wrong type, and the lines read again after it."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from loopwarden.sessions.acp import CLOSE, AcpAdapter
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.verdicts import Action, Verdict
from tests.acp.test_adapter import permission, started, upd
from tests.support.jsonl import json_lines


def stored(memory: dict[str, Any] | None) -> dict[str, Any]:
    """What the store gives back of a memory: JSON (int keys as strings)."""
    back = orjson.loads(orjson.dumps(memory))
    assert isinstance(back, dict)
    return back


def taken_up(memory: dict[str, Any], held: set[int]) -> AcpAdapter:
    """A later daemon's adapter: its command read again (`LiveSession.run`), after `recall`."""
    adapter = AcpAdapter()
    adapter.recall(memory, held)
    adapter.command(["agent", "--acp", "--", "go"])
    adapter.cwd = "/w"
    return adapter


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


def test_the_memory_round_trips_through_json_and_only_held_requests_still_wait() -> None:
    adapter = started()  # initialize, session/new, session/prompt (ids 1, 2, 3): the prompt unanswered
    held = permission(adapter, 7, 3)
    answered = permission(adapter, 8, 4)
    adapter.parse_stdout(upd(sessionUpdate="tool_call", toolCallId="u1", title="ls", kind="read",
                             rawInput={"path": "x"}), 5)
    adapter.parse_stdout(upd(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "half "}), 6)
    assert adapter.inject_line("look at x", "operator", "operator") is None  # the turn runs: queued
    memory = stored(adapter.memory())
    assert len(orjson.dumps(memory)) < 4096
    again = taken_up(memory, {held.seq})
    assert again.memory() == {**memory, "pending": {"3": memory["pending"]["3"]}}
    assert again.verdict_line(answered, None) is None  # the earlier daemon answered it
    [answer] = json_lines(again.verdict_line(held, None) or b"")
    assert answer == {"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "selected", "optionId": "a"}}}
    done = again.parse_stdout(upd(sessionUpdate="tool_call_update", toolCallId="u1", status="completed",
                                  content=[{"type": "content", "content": {"type": "text", "text": "out"}}]), 9)
    assert [type(e) for e in done] == [ev.AssistantMessage, ev.ToolCall, ev.ToolResult]
    assert done[0].text == "half " and done[1].args == {"path": "x"}  # type: ignore[attr-defined]
    ended = again.parse_stdout(line({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}), 10)
    assert ended[-1] == ev.Iteration(seq=10, n=1, status="pass")
    [prompt] = json_lines(b"".join(again.replies(False)))
    assert prompt["id"] == 4 and prompt["method"] == "session/prompt"  # the next id, the session remembered
    assert prompt["params"]["sessionId"] == "s1"  # type: ignore[index]
    assert "look at x" in prompt["params"]["prompt"][0]["text"]  # type: ignore[index]
    again.parse_stdout(line({"jsonrpc": "2.0", "id": 4, "result": {"stopReason": "end_turn"}}), 11)
    assert again.replies(False) == [CLOSE]


def test_a_held_request_blocked_after_take_up_is_rejected_once() -> None:
    adapter = started()
    held = permission(adapter, 7, 3)
    again = taken_up(stored(adapter.memory()), {held.seq})
    [answer] = json_lines(again.verdict_line(held, Verdict(Action.BLOCK, "repetition", "again", message="no")) or b"")
    assert answer["result"] == {"outcome": {"outcome": "selected", "optionId": "r"}}
    assert again.verdict_line(held, None) is None


WRONG: list[Any] = [None, True, -3, 2.5, "", "x" * 300, [], [1, "a", None], {}, {"1": [1]}, {"x": {"y": 1}},
                    {"truncated": True, "chars": 99999, "preview": "{"}]


@pytest.mark.parametrize("wrong", WRONG, ids=repr)
def test_every_value_of_the_wrong_type_is_tolerated(wrong: Any) -> None:
    adapter = started()
    permission(adapter, 7, 3)
    memory = stored(adapter.memory())
    parser = memory["parser"]
    broken = {**{key: wrong for key in memory}, "parser": {key: wrong for key in parser}}
    for each in (broken, {**memory, "pending": {"3": wrong, "x": [1, []]}, "requests": {"3": wrong, "y": "z"}},
                 {**memory, "parser": {**parser, "calls": {"c": wrong}}}, stored(wrong) if isinstance(wrong, dict)
                 else {}):
        again = taken_up(stored(each), {3})
        kept = stored(again.memory())  # usable, and storable again
        assert isinstance(kept["ids"], int) and kept["ids"] >= 0
        assert all(isinstance(text, str) for text in kept["queued"])
        again.verdict_line(ev.ToolCall(seq=3, tool="execute", args={}), None)
        again.inject_line("hello", "operator", "operator")
        again.replies(False)
        again.parse_stdout(line({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}), 4)
        again.stop_line("operator", "bye")


def test_lines_read_again_show_a_prompt_sent_after_the_memory() -> None:
    """The memory was taken while turn 1 ran; the earlier daemon then ended it, sent operator text as a prompt
    (no line asked for it) and a gate held turn 2's permission request. Read again, those lines leave the adapter
    in turn 2: the held request answered after take-up, turn 2's end (an id it never saw) ends the session."""
    adapter = started()
    memory = stored(adapter.memory())
    again = taken_up(memory, {6})
    again.reread(line({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}), 4)
    again.reread(upd(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "on it"}), 5)
    again.reread(line({"jsonrpc": "2.0", "id": 9, "method": "session/request_permission",
                       "params": {"sessionId": "s1", "toolCall": {"toolCallId": "t", "title": "touch m"},
                                  "options": [{"optionId": "a", "kind": "allow_once"}]}}), 6)
    assert again.running and not again.turn_over
    [answer] = json_lines(again.verdict_line(ev.ToolCall(seq=6, tool="other", args={"title": "touch m"}), None)
                          or b"")
    assert answer["id"] == 9 and answer["result"]["outcome"]["optionId"] == "a"  # type: ignore[index]
    assert again.replies(False) == []  # turn 2 runs: nothing to close
    events = again.parse_stdout(line({"jsonrpc": "2.0", "id": 4, "result": {"stopReason": "end_turn"}}), 7)
    assert events == [ev.Iteration(seq=7, n=2, status="pass")]
    assert again.replies(False) == [CLOSE]


def test_a_permission_request_read_again_that_no_gate_holds_was_answered() -> None:
    adapter = started()
    again = taken_up(stored(adapter.memory()), set())
    again.reread(line({"jsonrpc": "2.0", "id": 9, "method": "session/request_permission",
                       "params": {"sessionId": "s1", "toolCall": {"toolCallId": "t", "title": "ls"},
                                  "options": [{"optionId": "a", "kind": "allow_once"}]}}), 4)
    assert again.verdict_line(ev.ToolCall(seq=4, tool="other", args={"title": "ls"}), None) is None
    again.parse_stdout(line({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}), 5)
    assert again.replies(False) == [CLOSE]


def test_the_memory_stays_small_whatever_the_agent_sends() -> None:
    adapter = started()
    for n in range(100):
        permission(adapter, 100 + n, 10 + n)
        adapter.parse_stdout(upd(sessionUpdate="tool_call", toolCallId=f"u{n}", title="edit", kind="edit",
                                 rawInput={"text": "x" * 10_000}), 200 + n)
    adapter.parse_stdout(upd(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "m" * 60_000}), 400)
    for _ in range(20):
        adapter.inject_line("n" * 5_000, "operator", "operator")
    memory = adapter.memory()
    assert len(orjson.dumps(memory)) < 16 * 1024
    again = taken_up(stored(memory), {10, 100, 109})  # permission requests at seqs 10 to 109: the newest 16 kept
    assert set(again.memory()["pending"]) == {"100", "109"}  # type: ignore[index]


@pytest.mark.parametrize("memory", [{}, {"truncated": True, "chars": 99999, "preview": "{"}], ids=["none", "too large"])
def test_without_a_memory_the_agent_was_sent_its_start_alone(memory: dict[str, Any]) -> None:
    """The earlier daemon died before it stored a position: its `initialize` is answered to the next daemon, which
    goes on from there (the session, then the prompt)."""
    again = taken_up(memory, set())
    again.parse_stdout(line({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}}), 1)
    [new] = json_lines(b"".join(again.replies(False)))
    assert (new["id"], new["method"]) == (2, "session/new")
    events = again.parse_stdout(line({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s9"}}), 2)
    assert events == [ev.UserMessage(seq=2, text="go")]
    [prompt] = json_lines(b"".join(again.replies(False)))
    assert prompt["method"] == "session/prompt" and prompt["params"]["sessionId"] == "s9"  # type: ignore[index]
