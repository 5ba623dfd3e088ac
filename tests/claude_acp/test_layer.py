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
