"""Codex CLI hook events (command hooks in `$CODEX_HOME/hooks.json`) to Events, and answers back.

Verified against Codex CLI 0.163.0 (`codex exec`, docs/codex-hooks.md): a PreToolUse event carries
`session_id` (the thread id), `turn_id`, `transcript_path`, `cwd`, `hook_event_name`, `model`,
`permission_mode`, `tool_name` ("Bash" for a shell command), `tool_input` (`{"command": ...}`) and
`tool_use_id` (the model's call id): Claude Code's fields, so Claude's mapping reads it. Codex reads
Claude Code's PreToolUse answer: a deny reaches the model as the call's output ("Command blocked by
PreToolUse hook: <reason>. Command: <command>"), `additionalContext` on an allowed call as a user
message. An answer that also says `continue: false` is ignored whole (the call runs), so ending a
session is a plain deny here.
"""

from __future__ import annotations

from typing import Any

from ..supervisor import events as ev
from . import claude_hooks as ch

EVENT_LABELS = {  # hooks.json event names -> the label Codex uses in a hook's trust key
    "PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use", "PermissionRequest": "permission_request",
    "UserPromptSubmit": "user_prompt_submit", "Stop": "stop", "SessionStart": "session_start",
    "PreCompact": "pre_compact", "PostCompact": "post_compact",
}


def hook_events(obj: dict[str, Any], seq: int, ts: float | None = None) -> list[ev.Event]:
    """One Codex hook event to zero or more Events (the same fields as Claude Code's)."""
    return ch.hook_events(obj, seq, ts)


def pre_tool_use(deny: str | None = None, context: str | None = None) -> dict[str, Any] | None:
    """A PreToolUse answer: a deny with its reason, or text for the model on an allowed call."""
    return ch.pre_tool_use(deny=deny, context=context)


def halt(event: str, text: str) -> dict[str, Any] | None:
    """The session was ended by loopwarden: deny every further tool call with `text` (Codex would
    ignore a `continue: false`, and the call with it)."""
    return pre_tool_use(deny=text) if event == "PreToolUse" else None
