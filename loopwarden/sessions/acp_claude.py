"""Claude Code over ACP (`@zed-industries/claude-agent-acp`): loopwarden's private layer for it.

The adapter answers `echo`, `ls`, `sleep` and other commands Claude Code deems safe without a
permission request, so a supervisor would never see them. loopwarden adds one settings layer of its
own that makes every Bash call ask: `{"permissions": {"ask": ["Bash"]}}`, sent in `session/new`'s
`_meta.claudeCode.options.settings`. The adapter passes those options to the Claude Agent SDK, which
hands them to Claude Code as `--settings`: the "flag settings" layer, above the user's, project's
and local settings and merged with them. Nothing is written to disk and nothing of the user's is
hidden or replaced: HOME, the login (`~/.claude/.credentials.json`, `~/.claude.json`),
`~/.claude/settings.json` and the project's `.claude/` all still apply. An `ask` rule outranks an
`allow` rule, so a user's `allow: ["Bash(sleep:*)"]` still asks loopwarden.

Two modes skip `ask` rules: `bypassPermissions` runs everything and `dontAsk` denies what is not
pre-approved, neither asking. When the user's settings start the session in one of them, loopwarden
switches it to `default` (`session/set_mode`) before the first prompt.

After a `session/cancel` the adapter answers the next prompt one turn late (that prompt ends at once
and empty; its answer streams during the prompt after it). `session/close` then `session/resume` with
the same session id starts a fresh Claude Code on the same history and ends the lag; the resume
carries the same `_meta`, or the resumed session would not ask.

With a session open the adapter outlives the end of its stdin; after `session/close` it exits 0, so
loopwarden closes the session before stdin, at the end and on a stop.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .acp import AgentHooks

# Every Bash call asks, safe or not.
ASK_EVERY_CALL: dict[str, Any] = {"permissions": {"ask": ["Bash"]}}
# Modes in which Claude Code never asks: switched to DEFAULT_MODE.
UNWATCHED_MODES = frozenset({"bypassPermissions", "dontAsk"})
DEFAULT_MODE = "default"
# Set by some sandboxes to `yes`; as root it makes the adapter pass a flag Claude Code then refuses.
# Emptied, not removed (a layer only adds variables): the adapter tests it for truth.
EMPTIED_ENV = ("IS_SANDBOX",)


def session_meta(meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """`_meta` for `session/new` and `session/resume`: `meta` with loopwarden's settings layer added.

    Settings already in `meta` are kept; loopwarden's `ask` rules are added to theirs."""
    out = copy.deepcopy(meta) if meta else {}
    claude = out.setdefault("claudeCode", {})
    options = claude.setdefault("options", {})
    settings = options.get("settings")
    settings = dict(settings) if isinstance(settings, dict) else {}
    permissions = settings.get("permissions")
    permissions = dict(permissions) if isinstance(permissions, dict) else {}
    ask = permissions.get("ask")
    ask = [a for a in ask if isinstance(a, str)] if isinstance(ask, list) else []
    permissions["ask"] = ask + [a for a in ASK_EVERY_CALL["permissions"]["ask"] if a not in ask]
    settings["permissions"] = permissions
    options["settings"] = settings
    return out


def mode_to_set(result: dict[str, Any]) -> str | None:
    """The mode to switch to after `session/new` or `session/resume` answered `result`, or None."""
    modes = result.get("modes")
    current = modes.get("currentModeId") if isinstance(modes, dict) else None
    return DEFAULT_MODE if current in UNWATCHED_MODES else None


def layer_env(env: Mapping[str, str]) -> dict[str, str]:
    """Variables set for the adapter on top of the user's: those that break it, emptied."""
    return {k: "" for k in EMPTIED_ENV if env.get(k)}


class ClaudeAcpHooks(AgentHooks):
    """The private layer in every `session/new` and `session/resume`; a mode that never asks switched to
    `default`; operator and supervisor text steered into the running turn (the adapter queues a prompt
    sent mid-turn and Claude Code adds it to the next tool result); close and resume after a cancel;
    `session/close` before stdin's end, so the adapter exits by itself."""

    steers = True
    reopen_after_cancel = True
    close_before_exit = True  # with a session open, the adapter outlives stdin's end; closed, it exits 0

    def session_params(self, params: dict[str, Any]) -> dict[str, Any]:
        meta = params.get("_meta")
        return {**params, "_meta": session_meta(meta if isinstance(meta, dict) else None)}

    def setup(self, session_id: str, result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        mode = mode_to_set(result)
        if mode is None:
            return []
        return [("session/set_mode", {"sessionId": session_id, "modeId": mode})]
