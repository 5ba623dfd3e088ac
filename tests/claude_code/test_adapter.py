"""The claude-code adapter on its own: arguments, the control protocol, and bad input (no CLI needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loopwarden.sessions.claude_launch import FIXED_ARGS, launch_command, split_args
from loopwarden.sessions.claude_live import CLOSE, HOOK_ID, ClaudeCodeAdapter
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.verdicts import Action, Verdict


def dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def hook(request_id: str, call_id: str, tool: str = "Bash", args: Any = None, **extra: Any) -> bytes:
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": tool,
               "tool_input": {"command": "ls"} if args is None else args, "tool_use_id": call_id, **extra}
    return dumps({"type": "control_request", "request_id": request_id,
                  "request": {"subtype": "hook_callback", "callback_id": HOOK_ID, "input": payload,
                              "tool_use_id": call_id}})


def assistant_tool_use(call_id: str, parent: str | None = None) -> bytes:
    return dumps({"type": "assistant", "parent_tool_use_id": parent,
                  "message": {"id": f"msg_{call_id}", "role": "assistant",
                              "content": [{"type": "tool_use", "id": call_id, "name": "Bash",
                                           "input": {"command": "ls"}}]}})


def tool_result(call_id: str, text: str = "a\nb", is_error: bool = False) -> bytes:
    return dumps({"type": "user", "parent_tool_use_id": None, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": is_error}]}})


def replay(text: str) -> bytes:
    return dumps({"type": "user", "isReplay": True, "message": {"role": "user", "content": text}})


def response(data: bytes) -> dict[str, Any]:
    return json.loads(data)["response"]


BLOCK = Verdict(Action.BLOCK, "repetition", "Bash called 6x", message="Tool call blocked: try something else")


# ---- arguments -----------------------------------------------------------------

@pytest.mark.parametrize(("args", "options", "prompt"), [
    (["fix it"], [], "fix it"),
    (["--max-turns", "5", "fix it"], ["--max-turns", "5"], "fix it"),
    (["fix it", "--max-turns", "5"], ["--max-turns", "5"], "fix it"),
    (["-p", "fix it", "--model", "sonnet"], ["--model", "sonnet"], "fix it"),
    (["--allowedTools", "Bash", "Read", "--", "fix it"], ["--allowedTools", "Bash", "Read"], "fix it"),
    (["--allowedTools=Bash,Read", "fix it"], ["--allowedTools=Bash,Read"], "fix it"),
    (["--allowedTools", "Bash", "Read"], ["--allowedTools", "Bash", "Read"], None),  # claude reads them as tools
    # the README's command: the list's last value is a sentence, the prompt the user meant
    (["--max-turns", "30", "--allowedTools", "Bash,Read,Edit", "fix the failing test"],
     ["--max-turns", "30", "--allowedTools", "Bash,Read,Edit"], "fix the failing test"),
    (["--allowedTools", "Bash(git log:*)", "Bash(git diff:*)"], ["--allowedTools", "Bash(git log:*)",
                                                                "Bash(git diff:*)"], None),  # permission rules
    (["--allowedTools", "fix the failing test"], ["--allowedTools", "fix the failing test"], None),  # its one value
    # values claude reads as tools or paths are never sent to the model as a prompt
    (["--allowedTools", "Bash", "Read Edit Write"], ["--allowedTools", "Bash", "Read Edit Write"], None),
    (["--disallowedTools", "Bash", "Bash(rm -rf:*) WebFetch"], ["--disallowedTools", "Bash",
                                                               "Bash(rm -rf:*) WebFetch"], None),
    (["--allowedTools", "Bash", "mcp__github__get_issue mcp__github__list"],
     ["--allowedTools", "Bash", "mcp__github__get_issue mcp__github__list"], None),
    (["--add-dir", "../lib", "/home/ann/My Projects/shared"],
     ["--add-dir", "../lib", "/home/ann/My Projects/shared"], None),
    (["--mcp-config", "a.json", "my servers.json"], ["--mcp-config", "a.json", "my servers.json"], None),
    (["--disallowedTools", "WebFetch", "do not touch the network"], ["--disallowedTools", "WebFetch"],
     "do not touch the network"),
    (["--output-format", "json", "--verbose", "--input-format=text", "go"], [], "go"),
    (["--resume", "abc", "go on"], ["--resume", "abc"], "go on"),
    (["--max-turns", "5"], ["--max-turns", "5"], None),
    (["--dangerously-skip-permissions", "go"], ["--dangerously-skip-permissions"], "go"),
])
def test_the_prompt_is_the_argument_that_is_no_option_or_value(args: list[str], options: list[str],
                                                               prompt: str | None) -> None:
    split = split_args(args)
    assert (split.options, split.prompt) == (options, prompt)


def test_the_command_is_claude_in_stream_json_mode_and_the_prompt_goes_to_stdin() -> None:
    adapter = ClaudeCodeAdapter()
    argv = adapter.command(["/bin/claude", "--max-turns", "5", "fix the tests"])
    assert argv == ["/bin/claude", *FIXED_ARGS, "--max-turns", "5"]
    init, prompt = (json.loads(x) for x in adapter.start_lines())
    assert init["type"] == "control_request" and init["request"]["subtype"] == "initialize"
    assert init["request"]["hooks"] == {"PreToolUse": [{"matcher": None, "hookCallbackIds": [HOOK_ID],
                                                        "timeout": 86400}]}
    assert prompt == {"type": "user", "message": {"role": "user", "content": "fix the tests"},
                      "parent_tool_use_id": None, "session_id": "default"}


def test_launch_command_finds_the_binary_and_needs_a_prompt(tmp_path: Any) -> None:
    env = {"LOOPWARDEN_CLAUDE": "/opt/cc/claude", "PATH": ""}
    assert launch_command(["--max-turns", "3", "go"], env) == ["/opt/cc/claude", "--max-turns", "3", "go"]
    assert launch_command(["claude", "go"], env) == ["claude", "go"]  # named explicitly: kept
    with pytest.raises(ValueError, match="no prompt"):
        launch_command(["--max-turns", "3"], env)


# ---- the control protocol ----------------------------------------------------------

def test_a_hook_callback_is_the_tool_call_and_the_verdict_answers_it() -> None:
    adapter = ClaudeCodeAdapter()
    assert adapter.parse_stdout(assistant_tool_use("toolu_1"), 4) == []  # judged at its hook, not here
    [call] = adapter.parse_stdout(hook("req-1", "toolu_1"), 5)
    assert isinstance(call, ev.ToolCall)
    assert (call.tool, call.args, call.call_id, call.seq) == ("Bash", {"command": "ls"}, "toolu_1", 5)
    assert response(adapter.verdict_line(call, None)) == {"subtype": "success", "request_id": "req-1",
                                                           "response": {}}
    [call2] = adapter.parse_stdout(hook("req-2", "toolu_2"), 9)
    assert response(adapter.verdict_line(call2, BLOCK)) == {
        "subtype": "success", "request_id": "req-2",
        "response": {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                            "permissionDecisionReason": "Tool call blocked: try something else"}}}
    assert adapter.verdict_line(call2, BLOCK) is None  # answered once
    # a vetoed call's error result is not an event (as in the native protocol); an allowed one is
    assert adapter.parse_stdout(tool_result("toolu_2", "PreToolUse:Bash hook error: ...", True), 10) == []
    [result] = adapter.parse_stdout(tool_result("toolu_1"), 11)
    assert isinstance(result, ev.ToolResult) and (result.call_id, result.tool) == ("toolu_1", "Bash")


def test_sub_agent_calls_keep_the_task_call_as_their_agent() -> None:
    adapter = ClaudeCodeAdapter()
    adapter.parse_stdout(assistant_tool_use("toolu_sub", parent="toolu_task"), 3)
    [call] = adapter.parse_stdout(hook("r", "toolu_sub", agent_id="a1"), 4)
    assert call.agent == "toolu_task"  # type: ignore[union-attr]


def test_a_call_that_never_reached_the_hook_is_still_seen_before_its_result() -> None:
    adapter = ClaudeCodeAdapter()
    adapter.parse_stdout(assistant_tool_use("toolu_9"), 3)
    call, result = adapter.parse_stdout(tool_result("toolu_9", "<tool_use_error>Blocked: sleep", True), 4)
    assert isinstance(call, ev.ToolCall) and call.call_id == "toolu_9"
    assert isinstance(result, ev.ToolResult) and result.failed


def test_a_cancelled_hook_gets_no_late_answer() -> None:
    adapter = ClaudeCodeAdapter()
    [call] = adapter.parse_stdout(hook("req-7", "toolu_7"), 5)
    adapter.parse_stdout(dumps({"type": "control_cancel_request", "request_id": "req-7"}), 6)
    assert adapter.verdict_line(call, None) is None  # type: ignore[arg-type]


def test_requests_it_does_not_handle_are_answered_at_once() -> None:
    adapter = ClaudeCodeAdapter()
    assert adapter.parse_stdout(dumps({"type": "control_request", "request_id": "m1",
                                       "request": {"subtype": "mcp_message"}}), 1) == []
    assert adapter.parse_stdout(dumps({"type": "control_request", "request_id": "p1", "request": {
        "subtype": "can_use_tool", "tool_name": "Bash", "input": {}}}), 2) == []
    [error, permission] = [response(x) for x in adapter.replies(False)]
    assert (error["subtype"], error["request_id"]) == ("error", "m1")
    assert permission["response"]["behavior"] == "deny"
    assert adapter.replies(False) == []


def test_a_failed_initialize_turns_vetoes_off_and_says_so() -> None:
    adapter = ClaudeCodeAdapter()
    init_id = json.loads(adapter.start_lines()[0])["request_id"]
    [error] = adapter.parse_stdout(dumps({"type": "control_response", "response": {
        "subtype": "error", "request_id": init_id, "error": "unsupported"}}), 1)
    assert isinstance(error, ev.Error) and "initialize failed" in error.message
    assert not adapter.can_veto


def test_injections_are_user_lines_and_an_escalation_switches_the_model() -> None:
    adapter = ClaudeCodeAdapter()
    [user] = adapter.inject_line("try grep", "nudge", "repetition").splitlines()  # type: ignore[union-attr]
    assert json.loads(user)["message"]["content"] == "Message from the supervisor (loopwarden): try grep"
    model, user = adapter.inject_line("bigger model", "escalate", "x", "sonnet").splitlines()  # type: ignore[union-attr]
    assert json.loads(model)["request"] == {"subtype": "set_model", "model": "sonnet"}
    assert json.loads(user)["type"] == "user"
    assert adapter.inject_line("Failed to parse your response", "nudge", "validation") is None  # the CLI's fault


def test_stdin_closes_once_the_turn_is_over_and_everything_sent_was_read() -> None:
    adapter = ClaudeCodeAdapter()
    adapter.command(["claude", "go"])
    adapter.start_lines()  # the prompt: one user line sent
    result = dumps({"type": "result", "subtype": "success", "usage": {}, "total_cost_usd": 0.01})
    assert [type(e) for e in adapter.parse_stdout(replay("go"), 2)] == [ev.UserMessage]
    adapter.inject_line("a nudge", "nudge", "repetition")
    adapter.parse_stdout(result, 3)
    assert adapter.replies(False) == []  # the nudge was not read yet: it starts the next turn
    assert adapter.parse_stdout(replay("Message from the supervisor (loopwarden): a nudge"), 4) == []
    adapter.parse_stdout(result, 5)
    assert adapter.replies(True) == []  # a gate is open
    assert adapter.replies(False) == [CLOSE]
    assert adapter.replies(False) == [] and adapter.inject_line("late", "nudge", "x") is None
    assert adapter.stop_line("operator", "bye") is None  # stdin is closed already


def system(subtype: str, **fields: Any) -> bytes:
    return dumps({"type": "system", "subtype": subtype, **fields})


def test_stdin_stays_open_while_a_background_sub_agent_works() -> None:
    # 2.1.330 runs an Agent call's sub-agent in the background: the turn ends (`result`) while it
    # still works, its calls still need the hook (over stdin), and its end starts a turn of its own
    adapter = ClaudeCodeAdapter()
    adapter.command(["claude", "go"])
    adapter.start_lines()
    result = dumps({"type": "result", "subtype": "success", "usage": {}, "total_cost_usd": 0.01})
    adapter.parse_stdout(replay("go"), 1)
    adapter.parse_stdout(system("background_tasks_changed", tasks=[{"task_id": "t1"}]), 2)
    adapter.parse_stdout(system("task_started", task_id="t1", tool_use_id="toolu_task", is_backgrounded=True), 3)
    adapter.parse_stdout(result, 4)
    assert adapter.replies(False) == []  # the sub-agent still works
    [call] = adapter.parse_stdout(hook("r1", "toolu_sub", agent_id="t1"), 5)
    assert response(adapter.verdict_line(call, None))["request_id"] == "r1"  # type: ignore[arg-type]
    assert adapter.replies(False) == []
    adapter.parse_stdout(system("task_notification", task_id="t1", tool_use_id="toolu_task", status="completed"), 6)
    adapter.parse_stdout(system("background_tasks_changed", tasks=[]), 7)
    assert adapter.replies(False) == []  # the notification's own turn has not ended yet
    adapter.parse_stdout(result, 8)
    assert adapter.replies(False) == [CLOSE]


def test_terminate_is_an_interrupt_request() -> None:
    adapter = ClaudeCodeAdapter()
    request = json.loads(adapter.stop_line("repetition_loop", "looping"))  # type: ignore[arg-type]
    assert request["type"] == "control_request" and request["request"] == {"subtype": "interrupt"}
    assert adapter.stop_grace > 0


# ---- bad input -------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    b"not json", b"[1, 2]", b'"text"', b"{}", b'{"type": 7}', b'{"type": "mystery", "x": 1}',
    b'{"type": "control_request"}', b'{"type": "control_request", "request_id": 5, "request": []}',
    b'{"type": "control_request", "request_id": "x", "request": {"subtype": "hook_callback", "input": 3}}',
    b'{"type": "control_response", "response": "odd"}', b'{"type": "control_cancel_request"}',
    b'{"type": "assistant", "message": null}', b'{"type": "user", "message": {"content": [1, null, {}]}}',
    b'{"type": "result", "usage": "none", "total_cost_usd": "a lot"}', b"\xff\xfe\x00",
    b'{"type": "user", "isReplay": true, "message": 3}',
])
def test_bad_lines_never_raise(raw: bytes) -> None:
    adapter = ClaudeCodeAdapter()
    events = adapter.parse_stdout(raw, 1)
    assert all(isinstance(e, ev.Event) for e in events)
    adapter.replies(False)


def test_an_oversized_hook_request_is_still_answered_with_a_veto() -> None:
    adapter = ClaudeCodeAdapter()
    head = hook("req-big", "toolu_big", args={"content": "x" * 300})[:256]
    answer = response(adapter.oversized_reply(head, 5_000_000, 7, 1 << 20))  # type: ignore[arg-type]
    assert answer["request_id"] == "req-big"
    assert answer["response"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    other = dumps({"type": "control_request", "request_id": "req-x", "request": {"subtype": "mcp_message"}})
    assert response(adapter.oversized_reply(other, 5_000_000, 8, 1 << 20))["subtype"] == "error"  # type: ignore[arg-type]
    assert adapter.oversized_reply(b'{"type":"user","message":', 5_000_000, 9, 1 << 20) is None


@pytest.mark.parametrize("depth", [64, 65, 250, 1024, 1025, 5000])
def test_a_hook_request_nested_too_deeply_is_refused_never_left_waiting(depth: int) -> None:
    from loopwarden.supervisor.bounds import MAX_DEPTH, TOO_DEEP

    # the line > request > input > tool_input: tool_input nests depth - 3 levels
    tool_input = b'{"a":' * (depth - 4) + b"{}" + b"}" * (depth - 4)
    raw = hook("req-deep", "toolu_deep", args={"x": 0}).replace(b'{"x": 0}', tool_input)
    adapter = ClaudeCodeAdapter()
    events = adapter.parse_stdout(raw, 7)
    if depth <= MAX_DEPTH:
        assert [type(e) for e in events] == [ev.ToolCall]
        assert response(adapter.verdict_line(events[0], None))["request_id"] == "req-deep"  # type: ignore[arg-type]
        return
    assert [(type(e), e.reason) for e in events] == [(ev.InvalidLine, TOO_DEEP)]  # type: ignore[attr-defined]
    [reply] = adapter.replies(False)
    answer = response(reply)
    assert answer["request_id"] == "req-deep"
    denied = answer["response"]["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny" and TOO_DEEP in denied["permissionDecisionReason"]


def test_another_unreadable_control_request_gets_an_error_and_other_lines_nothing() -> None:
    adapter = ClaudeCodeAdapter()
    adapter.parse_stdout(b'{"type":"control_request","request_id":"req-x","request":{"subtype":"mcp_message",'
                         b'"x":' + b"[" * 100 + b"]" * 100 + b"}}", 3)
    [reply] = adapter.replies(False)
    assert response(reply)["subtype"] == "error" and "nested too deeply" in response(reply)["error"]
    adapter.parse_stdout(b'{"type":"user","x":' + b"[" * 100 + b"]" * 100 + b"}", 4)
    assert adapter.replies(False) == []
