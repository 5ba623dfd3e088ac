"""Hook events to loopwarden events, and the answers' shapes (pure functions)."""

from __future__ import annotations

from loopwarden.sessions import claude_hooks as ch
from loopwarden.supervisor import events as ev

from .helpers import event, post, pre


def test_tool_events_map_to_calls_and_results() -> None:
    [call] = ch.hook_events(pre(command="ls -la", call="toolu_7", agent_id="a1"), 3)
    assert isinstance(call, ev.ToolCall)
    assert (call.tool, call.args, call.call_id, call.agent, call.seq) == ("Bash", {"command": "ls -la"}, "toolu_7",
                                                                          "a1", 3)
    [result] = ch.hook_events(post(stdout="out"), 4)
    assert isinstance(result, ev.ToolResult) and (result.output, result.is_error) == ("out", False)
    failure = event("PostToolUseFailure", tool_name="Bash", tool_input={}, tool_use_id="t", error="Exit code 1")
    [failed] = ch.hook_events(failure, 5)
    assert (failed.output, failed.is_error, failed.failed) == ("Exit code 1", True, True)
    read = event("PostToolUse", tool_name="Read", tool_input={"file_path": "/a"},
                 tool_response={"type": "text", "file": {"filePath": "/a", "content": "hello"}})
    assert ch.hook_events(read, 6)[0].output == "hello"
    odd = event("PreToolUse", tool_input="not an object")
    assert ch.hook_events(odd, 7)[0].args == {"input": "not an object"}
    assert ch.hook_events(odd, 7)[0].tool == "unknown"


def test_turn_events() -> None:
    [prompt] = ch.hook_events(event("UserPromptSubmit", prompt="fix it"), 1)
    assert isinstance(prompt, ev.UserMessage) and prompt.text == "fix it"
    [said] = ch.hook_events(event("Stop", last_assistant_message="done"), 2)
    assert isinstance(said, ev.AssistantMessage) and said.text == "done"
    assert ch.hook_events(event("Stop", stop_hook_active=False), 3) == []  # older CLIs send no message
    assert isinstance(ch.hook_events(event("PreCompact", trigger="auto"), 4)[0], ev.Condensation)
    for name in ("SessionStart", "SessionEnd", "Notification", "SomethingNew"):
        assert ch.hook_events(event(name), 5) == []


def test_answers() -> None:
    assert ch.pre_tool_use() is None
    deny = ch.pre_tool_use(deny="stop repeating", context="operator says hi")["hookSpecificOutput"]
    assert deny == {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                    "permissionDecisionReason": "stop repeating\n\noperator says hi"}
    context = ch.pre_tool_use(context="note")["hookSpecificOutput"]
    assert "permissionDecision" not in context and context["additionalContext"] == "note"
    assert ch.with_context("Stop", "x") is None and ch.with_context("PostToolUse", None) is None
    assert ch.stop_block("go on") == {"decision": "block", "reason": "go on"}
    assert ch.halt("Stop", "ended") == {"continue": False, "stopReason": "ended"}
    halted = ch.halt("PreToolUse", "ended")
    assert halted["continue"] is False and halted["hookSpecificOutput"]["permissionDecision"] == "deny"


def _nest(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_a_tool_input_at_the_depth_bound_is_judged_whole_and_a_deeper_one_with_its_deep_part_cut() -> None:
    from loopwarden.supervisor.bounds import CUT_MARKER, MAX_DEPTH, depth_exceeds

    # the event (1) > tool_input (2...): tool_input nests MAX_DEPTH - 1 levels at the bound
    [whole] = ch.hook_events(event("PreToolUse", tool_name="T", tool_input=_nest(MAX_DEPTH - 1)), 1)
    assert whole.args == _nest(MAX_DEPTH - 1)
    for levels in (MAX_DEPTH, 250, 1023):
        [cut] = ch.hook_events(event("PreToolUse", tool_name="T", tool_input=_nest(levels)), 2)
        assert isinstance(cut, ev.ToolCall) and cut.tool == "T"
        assert not depth_exceeds(cut.args, MAX_DEPTH - 1)
        inner = cut.args
        while isinstance(inner, dict):
            inner = inner["a"]
        assert inner == CUT_MARKER


def test_a_deep_tool_response_still_becomes_text() -> None:
    [result] = ch.hook_events(event("PostToolUse", tool_name="T", tool_response={"x": _nest(1000)}), 3)
    assert isinstance(result, ev.ToolResult) and "cut by loopwarden" in result.output
