"""Codex CLI attached by its PreToolUse hook (command hooks in `$CODEX_HOME/hooks.json`): its events to Events,
answers back, and its adapter (CodexHookAdapter).

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

from ..supervisor import ladders
from ..supervisor import events as ev
from . import claude_hooks as ch
from .hooks import CODEX_HOME, HookAdapter

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


class CodexHookAdapter(HookAdapter):
    """Codex in the user's own terminal: only PreToolUse is hooked, so a block is a deny, text for the model
    rides on the next allowed call, a gate or a pause holds the call (the hook's timeout, 180 s, is above the
    hold, 120 s), and an ended session denies every further call. With no Stop event, the idle clock runs
    from every event."""

    name = "codex-hook"
    listed = 1
    agent = "codex"
    ladder = ladders.OPENAI
    hook_agent = "codex"
    title = "Codex"
    label = "codex"
    summary = "Codex CLI in the user's own terminal, attached by its PreToolUse hook"
    hook_help = ("The Codex PreToolUse hook command: reads the event on stdin, prints the daemon's answer. Never\n"
                 "blocks Codex when no daemon answers (LOOPWARDEN_HOOK_TIMEOUT, default 1.5s).\n\n"
                 "\b\nExample (Codex runs it; `loopwarden hook install --agent codex` puts it in hooks.json):\n"
                 "  loopwarden hook codex < pre_tool_use_event.json")
    programs = ("codex",)
    obeys_stop = False  # a denied call is only a call's output to Codex: a terminated one is signalled at once
    session_field = "codex_session"
    settings = CODEX_HOME
    hook_events = ("PreToolUse",)
    tool_events = frozenset({"PreToolUse"})

    def key_for(self, agent_session: str) -> str:
        return f"codex:{agent_session}"

    def resume_command(self, agent_session: str) -> list[str]:
        return ["codex", "resume", agent_session]

    def events(self, event: dict[str, Any], seq: int, now: float) -> list[ev.Event]:
        return hook_events(event, seq, now)

    def turn_of(self, event: dict[str, Any]) -> str | None:
        turn = event.get("turn_id")
        return turn if isinstance(turn, str) else None

    def starts_afresh(self, event: dict[str, Any], turn: str | None) -> bool:
        """A new turn after the session was ended (no UserPromptSubmit is hooked): the user came back."""
        new = self.turn_of(event)
        return new is not None and new != turn

    def pre_tool_use(self, deny: str | None = None, context: str | None = None) -> dict[str, Any] | None:
        return pre_tool_use(deny=deny, context=context)

    def halt(self, name: str, text: str) -> dict[str, Any] | None:
        return halt(name, text)
