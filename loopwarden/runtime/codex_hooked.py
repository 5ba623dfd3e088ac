"""A Codex CLI session the user started themselves, attached by `loopwarden hook codex` (its PreToolUse hook).

The same attached session as Claude Code's (hooked.py), with Codex's answers (sessions/codex_hooks.py):
only PreToolUse is hooked, so a block is a deny, text for the model rides on the next allowed call,
a gate or a pause holds the call (the hook's timeout, 180 s, is above the hold, 120 s), and an ended
session denies every further call. With no Stop event, the idle clock runs from every event.
"""

from __future__ import annotations

from typing import Any

from ..sessions import codex_hooks as xh
from ..sessions.base import Capability
from ..supervisor.events import Event
from ..supervisor.verdicts import Verdict
from .hooked import HookAdapter, HookedSession

ADAPTER = "codex-hook"
AGENT = "codex"  # the `agent` of a hook request sent by `loopwarden hook codex`


class CodexHookAdapter(HookAdapter):
    """What the daemon's operator commands ask of an attached Codex session."""

    name = ADAPTER
    agent = "codex"
    summary = "Codex CLI in the user's own terminal, attached by its PreToolUse hook"
    declared = Capability.VETO | Capability.HOLD | Capability.INJECT  # deny; hold the hook; context on a call
    capabilities = declared
    title = "Codex"
    programs = ("codex",)
    obeys_stop = False  # a denied call is only a call's output to Codex: a terminated one is signalled at once


class CodexHookedSession(HookedSession):
    """One Codex thread (the hook's `session_id`), judged as a Claude Code hooked session is."""

    adapter = CodexHookAdapter()
    label = "codex"

    @classmethod
    def key_for(cls, agent_session: str) -> str:
        return f"codex:{agent_session}"

    @staticmethod
    def resume_command(agent_session: str) -> list[str]:
        return ["codex", "resume", agent_session]

    turn: str | None = None  # the Codex turn of the last event judged while the session was live

    def answer(self, event: dict[str, Any], hold: float, idle: float | None = None,
               holder: int | None = None) -> dict[str, Any]:
        if not self.final and isinstance(event.get("turn_id"), str):
            self.turn = event["turn_id"]
        return super().answer(event, hold, idle, holder)

    def starts_afresh(self, event: dict[str, Any]) -> bool:
        """A new turn after the session was ended (no UserPromptSubmit is hooked): the user came back."""
        turn = event.get("turn_id")
        return isinstance(turn, str) and turn != self.turn

    def _events(self, event: dict[str, Any], seq: int, now: float) -> list[Event]:
        return xh.hook_events(event, seq, now)

    def _halt(self, name: str, text: str) -> dict[str, Any] | None:
        return xh.halt(name, text)

    def _turn_over(self, name: str) -> bool:
        return True

    def _output(self, name: str, block: Verdict | None) -> dict[str, Any] | None:
        return super()._output(name, block) if name == "PreToolUse" else None

    def snapshot(self) -> dict[str, Any]:
        snap = super().snapshot()
        snap.pop("claude_session", None)
        snap["codex_session"] = self.claude_id
        return snap


def hooked_kind(agent: Any) -> type[HookedSession]:
    """The attached session class for a hook request's `agent` (absent: Claude Code). ValueError if unknown."""
    if agent is None or agent == "claude-code":
        return HookedSession
    if agent == AGENT:
        return CodexHookedSession
    raise ValueError(f"unknown hook agent {str(agent)[:40]!r} (claude-code or codex)")
