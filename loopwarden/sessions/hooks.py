"""The contract of an agent attached by its hooks: the user starts it in their own terminal, and each of its
hook events reaches the daemon through `loopwarden hook HOOK_AGENT`.

An adapter module declares one subclass: how the agent's hook events read as Events, how each is answered
(a deny, text for the model, a stop), which program is the agent (what a hook's claim may bind), whether it
obeys a hook's stop, and where `loopwarden hook install` puts its hooks. The runtime's attached session
(runtime/hooked.py) and the command line ask it, never the agent's name; it is registered through the
`loopwarden.adapters` entry points, as every adapter is.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..supervisor.events import Event
from .base import Capability

# a hook request that names no agent comes from Claude Code's hook (the protocol's first agent)
DEFAULT_HOOK_AGENT = "claude-code"
# how an agent's hooks are installed (`hook install --agent HOOK_AGENT`): the settings file they live in
CLAUDE_SETTINGS = "claude-settings"  # Claude Code's settings.json: a project's .claude/, the user's, or one named
CODEX_HOME = "codex-home"  # $CODEX_HOME/hooks.json, and the hook's trust recorded in $CODEX_HOME/config.toml


class HookAdapter:
    """What the daemon asks of an agent attached by its hooks. Defaults: a hook that can deny a call, hold it
    for a gate and carry text, answering only PreToolUse."""

    name: ClassVar[str] = "hook"  # the sessions' adapter name (snapshots, the store, `loopwarden adapters`)
    listed: ClassVar[int] = 100  # a built-in's place among the hook-attached adapters
    agent: ClassVar[str] = "any"  # the kind of agent, shown beside each session
    ladder: ClassVar[tuple[str, ...]] = ()  # its models to escalate through, cheapest first (supervisor/ladders.py)
    hook_agent: ClassVar[str] = ""  # the word after `loopwarden hook`, and the `agent` of its hook requests
    title: ClassVar[str] = "agent"  # the agent in a sentence: "the Claude Code process that ran a hook"
    label: ClassVar[str] = "hook"  # session names are label:directory
    summary: ClassVar[str] = ""  # one line for `loopwarden adapters`
    hook_help: ClassVar[str] = ""  # the help of `loopwarden hook HOOK_AGENT`
    programs: ClassVar[tuple[str, ...]] = ()  # the agent's own program: what a hook's claim may bind (hook_claims.py)
    obeys_stop: ClassVar[bool] = True  # a terminated session's answers end its turn: it is signalled only if it
    # calls a tool after all, or when an operator kills it (else it is signalled as soon as it is terminated)
    session_field: ClassVar[str] = "agent_session"  # the snapshot field holding the agent's own session id
    declared: ClassVar[Capability] = Capability.VETO | Capability.HOLD | Capability.INJECT
    capabilities: ClassVar[Capability] = declared
    handshake = True
    can_veto = True
    can_inject = True
    context_events: ClassVar[frozenset[str]] = frozenset()  # events whose answer can carry text for the model
    blocks_stop: ClassVar[bool] = False  # a Stop answer can make the model carry on (with essential texts)
    settings: ClassVar[str] = CLAUDE_SETTINGS  # where `loopwarden hook install` puts its hooks
    hook_events: ClassVar[tuple[str, ...]] = ("PreToolUse",)  # the events its hooks are installed for...
    tool_events: ClassVar[frozenset[str]] = frozenset({"PreToolUse"})  # ... those matched against every tool ("*")

    def key_for(self, agent_session: str) -> str:
        """The daemon's key for the attached session of one agent session id."""
        return agent_session

    def resume_command(self, agent_session: str) -> list[str]:
        """The command that takes the agent's own session up again in a terminal (the session's command)."""
        return []

    def events(self, event: dict[str, Any], seq: int, now: float) -> list[Event]:
        """One hook event to zero or more Events."""
        raise NotImplementedError

    def turn_of(self, event: dict[str, Any]) -> str | None:
        """The agent's turn a hook event belongs to, when its events say (None: they do not)."""
        return None

    def starts_afresh(self, event: dict[str, Any], turn: str | None) -> bool:
        """Whether `event`, arriving after the session was terminated (its last turn judged: `turn`), starts a
        new one: a human came back."""
        return False

    def turn_over(self, name: str) -> bool:
        """Whether the idle clock runs after this event (a finished turn)."""
        return True

    def pre_tool_use(self, deny: str | None = None, context: str | None = None) -> dict[str, Any] | None:
        """A PreToolUse answer: a deny with its reason, or text for the model on an allowed call (None: allow)."""
        raise NotImplementedError

    def with_context(self, name: str, context: str | None) -> dict[str, Any] | None:
        """Text for the model in the answer to a `context_events` event."""
        return None

    def stop_block(self, reason: str) -> dict[str, Any] | None:
        """A Stop answer that makes the model carry on with `reason` (for `blocks_stop` agents)."""
        return None

    def halt(self, name: str, text: str) -> dict[str, Any] | None:
        """The answer to any event once the session was ended by loopwarden: stop the agent, or deny its call."""
        raise NotImplementedError
