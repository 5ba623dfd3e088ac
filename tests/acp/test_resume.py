"""The acp adapter continuing an earlier session, without a process: how it opens it (as the agent's
`initialize` advertises), the history a load replays kept out of the run's events, and the refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from loopwarden.sessions.acp import AcpAdapter, resume_method
from loopwarden.supervisor import events as ev


def reply(request_id: int, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    body.update({"error": error} if error else {"result": result or {}})
    return orjson.dumps(body)


def update(kind: str, **fields: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update",
                         "params": {"sessionId": "S1", "update": {"sessionUpdate": kind, **fields}}})


def sent(lines: list[bytes]) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in lines if x]


def resumed(agent: list[str]) -> AcpAdapter:
    adapter = AcpAdapter()
    adapter.resume("S1", "NOTE: carry on")
    adapter.command([*agent, "--", "the old prompt"])
    adapter.cwd = "/w"
    assert adapter.conversation == "S1" and adapter.resume_state == "waiting"
    [init] = sent(adapter.start_lines())
    assert init["method"] == "initialize"
    return adapter


def test_resume_is_preferred_and_load_is_the_fallback() -> None:
    assert resume_method({"agentCapabilities": {"loadSession": True, "sessionCapabilities": {"resume": {}}}}) == \
        "session/resume"
    assert resume_method({"agentCapabilities": {"loadSession": True}}) == "session/load"
    assert resume_method({"agentCapabilities": {"loadSession": False}}) is None
    assert resume_method({}) is None


def test_a_loaded_session_gets_the_note_as_its_prompt_and_its_replay_is_no_event() -> None:
    adapter = resumed(["opencode", "acp"])
    assert adapter.parse_stdout(reply(1, {"agentCapabilities": {"loadSession": True}}), 1) == []
    [load] = sent(adapter.replies(False))
    assert (load["method"], load["params"]) == ("session/load", {"cwd": "/w", "mcpServers": [], "sessionId": "S1"})
    assert adapter.parse_stdout(update("agent_message_chunk", content={"type": "text", "text": "OLD"}), 2) == []
    events = adapter.parse_stdout(reply(load["id"], {}), 3)
    assert [type(e) for e in events] == [ev.UserMessage] and events[0].text == "NOTE: carry on"  # type: ignore[attr-defined]
    [prompt] = sent(adapter.replies(False))
    assert prompt["method"] == "session/prompt" and prompt["params"]["sessionId"] == "S1"
    assert prompt["params"]["prompt"][0]["text"] == "NOTE: carry on"  # the old prompt is not sent again
    assert adapter.resume_state == "accepted"


def test_gemini_prompts_once_the_replay_after_its_answer_ends() -> None:
    adapter = resumed(["gemini", "--acp"])
    adapter.parse_stdout(reply(1, {"agentCapabilities": {"loadSession": True}}), 1)
    [load] = sent(adapter.replies(False))
    assert adapter.parse_stdout(reply(load["id"], {}), 2) == [] and adapter.replies(False) == []
    assert adapter.parse_stdout(update("user_message_chunk", content={"type": "text", "text": "OLD"}), 3) == []
    events = adapter.parse_stdout(update("available_commands_update", availableCommands=[]), 4)
    assert [e.text for e in events if type(e) is ev.UserMessage] == ["NOTE: carry on"]  # type: ignore[attr-defined]
    assert sent(adapter.replies(False))[0]["method"] == "session/prompt"
    assert adapter.resume_not_before(125.0) == 181.0  # the minute after the run's


def test_an_agent_that_advertises_no_way_back_is_refused_and_keeps_the_id() -> None:
    adapter = resumed(["opencode", "acp"])
    [error] = adapter.parse_stdout(reply(1, {"agentCapabilities": {}}), 1)
    assert type(error) is ev.Error and "neither session/resume nor session/load" in error.message
    assert (adapter.resume_state, adapter.conversation) == ("refused", "S1") and adapter.turn_over


def test_an_unknown_session_is_refused_with_the_agents_words() -> None:
    adapter = resumed(["opencode", "acp"])
    adapter.parse_stdout(reply(1, {"agentCapabilities": {"loadSession": True}}), 1)
    [load] = sent(adapter.replies(False))
    [error] = adapter.parse_stdout(reply(load["id"], error={"code": -32002, "message": "Resource not found: S1"}), 2)
    assert type(error) is ev.Error and error.message == "acp: session/load failed: Resource not found: S1"
    assert (adapter.resume_state, adapter.conversation, adapter.failure) == ("refused", "S1", error.message)


def test_gemini_is_taken_over_in_its_own_program_with_its_session_cleanup_off(tmp_path) -> None:
    env = {"HOME": str(tmp_path), "LOOPWARDEN_HOME": str(tmp_path / "lw"),
           "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(tmp_path / "none.json")}
    handover = AcpAdapter.handover(["/bin/gemini", "--acp", "--", "go"], "S1", "/w", env)
    assert handover.argv == ["/bin/gemini", "--resume", "S1"]
    settings = orjson.loads(Path(handover.env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"]).read_bytes())
    assert settings == {"general": {"sessionRetention": {"enabled": False}}}
    with pytest.raises(ValueError, match="knows no interactive program of 'opencode'"):
        AcpAdapter.handover(["opencode", "acp", "--", "go"], "S1", "/w", env)
