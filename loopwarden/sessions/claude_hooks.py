"""Claude Code attached by its hooks (settings-file command hooks): its events to Events, answers back in hook
output form, and its adapter (ClaudeCodeHookAdapter).

Verified against Claude Code 2.1.330: every event carries `session_id`, `cwd`, `transcript_path` and
`hook_event_name`; the answers below (PreToolUse deny, `additionalContext`, Stop `decision: block`,
`continue: false`) reach the model as shown in docs/claude-code-hooks.md.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..supervisor import ladders
from ..supervisor import events as ev
from ..supervisor.bounds import cut_deep, depth_exceeds
from .claude_code import block_text
from .hooks import CLAUDE_SETTINGS, HookAdapter

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")  # the hooks installed, matched to every tool...
OTHER_EVENTS = ("UserPromptSubmit", "Stop", "SessionStart", "SessionEnd")  # ... and the others
# hook events that can carry text to the model as additionalContext (a PreToolUse answer can too)
CONTEXT_EVENTS = frozenset({"PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "SessionStart"})
# events after which a new loopwarden session starts when the old one has ended: a human came back
FRESH_START_EVENTS = frozenset({"UserPromptSubmit", "SessionStart"})


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def response_text(response: Any) -> str:
    """A tool_response as the text the model saw (Bash stdout/stderr, Read content, else JSON)."""
    if isinstance(response, str):
        return response
    if isinstance(response, dict):
        if "stdout" in response or "stderr" in response:
            parts = [str(response.get(k) or "") for k in ("stdout", "stderr")]
            return "\n".join(p for p in parts if p)
        file = response.get("file")
        content = file.get("content") if isinstance(file, dict) else None
        if isinstance(content, str):
            return content
    if isinstance(response, list):
        return block_text(response)
    return orjson.dumps(response, option=orjson.OPT_SORT_KEYS, default=str).decode()


def hook_events(obj: dict[str, Any], seq: int, ts: float | None = None) -> list[ev.Event]:
    """One hook event to zero or more Events (SessionStart, SessionEnd, Notification: none).

    An event nested past MAX_DEPTH is still judged, with its too-deep parts replaced by CUT_MARKER:
    it is the user's own agent at work, and a refusal would either block it or let it through unseen.
    """
    if depth_exceeds(obj):
        obj = cut_deep(obj)
    name = obj.get("hook_event_name")
    agent = _str(obj.get("agent_id"))
    tool = _str(obj.get("tool_name")) or "unknown"
    call_id = _str(obj.get("tool_use_id"))
    if name == "PreToolUse":
        args = obj.get("tool_input")
        return [ev.ToolCall(seq=seq, ts=ts, agent=agent, tool=tool, call_id=call_id,
                            args=args if isinstance(args, dict) else {"input": args})]
    if name == "PostToolUse":
        return [ev.ToolResult(seq=seq, ts=ts, agent=agent, tool=tool, call_id=call_id,
                              output=response_text(obj.get("tool_response")))]
    if name == "PostToolUseFailure":
        return [ev.ToolResult(seq=seq, ts=ts, agent=agent, tool=tool, call_id=call_id, is_error=True,
                              output=str(obj.get("error") or "tool failed"))]
    if name == "UserPromptSubmit":
        return [ev.UserMessage(seq=seq, ts=ts, text=str(obj.get("prompt") or ""))]
    if name in ("Stop", "SubagentStop"):
        text = _str(obj.get("last_assistant_message"))
        return [ev.AssistantMessage(seq=seq, ts=ts, agent=agent, text=text)] if text else []
    if name == "PreCompact":
        return [ev.Condensation(seq=seq, ts=ts, text=_str(obj.get("trigger")))]
    return []


# ---- answers ---------------------------------------------------------------------

def pre_tool_use(deny: str | None = None, context: str | None = None) -> dict[str, Any] | None:
    """A PreToolUse answer. No permissionDecision unless denying: an allow would skip the user's
    own permission prompts."""
    if deny is None and not context:
        return None
    out: dict[str, Any] = {"hookEventName": "PreToolUse"}
    if deny is not None:
        out["permissionDecision"] = "deny"
        out["permissionDecisionReason"] = deny + (f"\n\n{context}" if context else "")
    else:
        out["additionalContext"] = context
    return {"hookSpecificOutput": out}


def with_context(event: str, context: str | None) -> dict[str, Any] | None:
    """Text for the model after a tool call, a prompt or a session start; None for other events."""
    if not context or event not in CONTEXT_EVENTS:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}


def stop_block(reason: str) -> dict[str, Any]:
    """A Stop answer that makes the model carry on with `reason` as a user turn."""
    return {"decision": "block", "reason": reason}


def halt(event: str, text: str) -> dict[str, Any]:
    """The session was ended by loopwarden: stop Claude (and deny a pending tool call)."""
    out: dict[str, Any] = {"continue": False, "stopReason": text}
    if event == "PreToolUse":
        out.update(pre_tool_use(deny=text) or {})
    return out


class ClaudeCodeHookAdapter(HookAdapter):
    """Claude Code in the user's own terminal: every hook event judged, texts on the answers that carry them,
    a Stop blocked for an operator's text, `continue: false` once the session ended."""

    name = "claude-code-hook"
    listed = 0
    agent = "claude-code"
    ladder = ladders.ANTHROPIC
    hook_agent = "claude-code"
    title = "Claude Code"
    label = "claude"
    summary = "Claude Code in the user's own terminal, attached by its hooks (hook install)"
    hook_help = ("The hook command itself: reads a hook event on stdin, prints the daemon's answer. Never blocks\n"
                 "the agent when no daemon answers (LOOPWARDEN_HOOK_TIMEOUT, default 1.5s).\n\n"
                 "\b\nExample (Claude Code runs it; `loopwarden hook install` puts it in the settings):\n"
                 "  echo '{\"hook_event_name\":\"SessionStart\",\"session_id\":\"x\"}' | loopwarden hook claude-code")
    programs = ("claude",)
    obeys_stop = True  # its answers end its turn (`continue: false`)
    session_field = "claude_session"
    context_events = CONTEXT_EVENTS
    blocks_stop = True  # Stop-hook block: the operator's text reaches the model as a user turn
    settings = CLAUDE_SETTINGS
    hook_events = TOOL_EVENTS + OTHER_EVENTS
    tool_events = frozenset(TOOL_EVENTS)

    def resume_command(self, agent_session: str) -> list[str]:
        return ["claude", "--resume", agent_session]

    def events(self, event: dict[str, Any], seq: int, now: float) -> list[ev.Event]:
        return hook_events(event, seq, now)

    def starts_afresh(self, event: dict[str, Any], turn: str | None) -> bool:
        return str(event.get("hook_event_name") or "") in FRESH_START_EVENTS

    def turn_over(self, name: str) -> bool:
        return name in ("Stop", "SessionStart")

    def pre_tool_use(self, deny: str | None = None, context: str | None = None) -> dict[str, Any] | None:
        return pre_tool_use(deny=deny, context=context)

    def with_context(self, name: str, context: str | None) -> dict[str, Any] | None:
        return with_context(name, context)

    def stop_block(self, reason: str) -> dict[str, Any] | None:
        return stop_block(reason)

    def halt(self, name: str, text: str) -> dict[str, Any] | None:
        return halt(name, text)
