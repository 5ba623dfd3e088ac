"""loopwarden's private layer for Claude Code over ACP: pure functions, no process."""

from __future__ import annotations

from loopwarden.sessions.acp_claude import layer_env, mode_to_set, session_meta


def test_the_layer_makes_bash_ask_in_the_flag_settings_option() -> None:
    assert session_meta() == {"claudeCode": {"options": {"settings": {"permissions": {"ask": ["Bash"]}}}}}


def test_the_layer_keeps_what_the_meta_already_holds() -> None:
    given = {"systemPrompt": "x", "claudeCode": {"options": {
        "model": "m", "settings": {"model": "s", "permissions": {"ask": ["Edit"], "deny": ["Bash(rm:*)"]}}}}}
    out = session_meta(given)
    settings = out["claudeCode"]["options"]["settings"]
    assert settings == {"model": "s", "permissions": {"ask": ["Edit", "Bash"], "deny": ["Bash(rm:*)"]}}
    assert out["systemPrompt"] == "x" and out["claudeCode"]["options"]["model"] == "m"
    assert given["claudeCode"]["options"]["settings"]["permissions"]["ask"] == ["Edit"], "the input was changed"
    assert session_meta(out) == out, "applied twice, Bash is listed once"


def test_modes_that_never_ask_are_switched_to_default() -> None:
    assert mode_to_set({"modes": {"currentModeId": "bypassPermissions"}}) == "default"
    assert mode_to_set({"modes": {"currentModeId": "dontAsk"}}) == "default"
    assert mode_to_set({"modes": {"currentModeId": "acceptEdits"}}) is None  # Bash still asks there
    assert mode_to_set({"modes": {"currentModeId": "default"}}) is None
    assert mode_to_set({}) is None and mode_to_set({"modes": "?"}) is None


def test_the_environment_empties_only_is_sandbox() -> None:
    assert layer_env({"HOME": "/h", "IS_SANDBOX": "yes"}) == {"IS_SANDBOX": ""}
    assert layer_env({"HOME": "/h"}) == {}


def test_the_claude_hooks_go_with_the_claude_adapter_only() -> None:
    from loopwarden.sessions.acp import AgentHooks, hooks_for
    from loopwarden.sessions.acp_claude import ClaudeAcpHooks

    assert isinstance(hooks_for(["/x/.agents/node_modules/.bin/claude-agent-acp"]), ClaudeAcpHooks)
    assert isinstance(hooks_for(["node", "/x/node_modules/@zed-industries/claude-agent-acp/dist/index.js"]),
                      ClaudeAcpHooks)
    for other in (["gemini", "--acp"], ["opencode", "acp"], ["python", "fake_acp_agent.py"]):
        assert type(hooks_for(other)) is AgentHooks


def test_the_claude_hooks_carry_the_layer_and_switch_a_mode_that_never_asks() -> None:
    from loopwarden.sessions.acp_claude import ClaudeAcpHooks

    hooks = ClaudeAcpHooks()
    params = hooks.session_params({"sessionId": "s", "cwd": "/w", "mcpServers": []})
    assert params["sessionId"] == "s" and params["_meta"] == session_meta()
    assert hooks.setup("s", {"modes": {"currentModeId": "dontAsk"}}) == [
        ("session/set_mode", {"sessionId": "s", "modeId": "default"})]
    assert hooks.setup("s", {"modes": {"currentModeId": "default"}}) == []


def test_a_claude_session_steers_and_another_acp_session_does_not() -> None:
    from loopwarden.sessions.acp import AcpAdapter
    from loopwarden.sessions.base import Capability

    claude, other = AcpAdapter(), AcpAdapter()
    claude.command(["claude-agent-acp", "--", "go"])
    other.command(["gemini", "--acp", "--", "go"])
    assert Capability.STEER in claude.capabilities and Capability.STEER not in other.capabilities
