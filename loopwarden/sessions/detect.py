"""Choosing the adapter when the user did not: from the command line, then from the agent's first line.

Agents driven by requests (`codex app-server`, ACP agents) wait for their client to speak first, so
they are known by their command line. Any other agent is known by its first stdout line: a loopwarden
event (native), Claude Code stream-json, a `codex exec --json` event. Anything else, or no line at
all, is plain output: shown and stored, never judged as a protocol. No command is stopped for not
speaking loopwarden's protocol unless `--adapter native` asked for it. Pure: no I/O.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..supervisor import protocol
from ..supervisor.events import EVENT_TYPES, Event
from . import formats, registry
from .base import AUTO, Adapter

SILENCE = 2.0  # seconds with no stdout line before the session shows as plain (its first line may still change it)


@dataclass(frozen=True)
class Choice:
    """The adapter chosen and why, in words for the operator."""

    adapter: str
    why: str

    def line(self) -> str:
        return f"adapter {self.adapter}: {self.why}"


def by_command(argv: list[str], env: Mapping[str, str] | None = None) -> Choice | None:
    """The adapter for an agent known by its command line (one that waits for its client), or None: the first
    adapter, built in or another package's, whose `waits_for_client` knows the command."""
    for name, cls in registry.adapters().items():
        why = cls.waits_for_client(argv, env or {}) if name != AUTO else None
        if why:
            return Choice(name, why)
    return None


def stdin_unused(argv: list[str]) -> str | None:
    """Why to close an agent's stdin at once, or None: a one-shot agent CLI that, given a pipe, waits for
    its end before it starts (and no adapter it can be chosen for writes to it)."""
    program = os.path.basename(argv[0]) if argv else ""
    if program == "codex" and argv[1:2] == ["exec"]:
        return "`codex exec` reads a piped stdin to its end before it starts; it gets none"
    if program == "claude" and ("-p" in argv or "--print" in argv) and "--input-format" not in argv:
        return "`claude -p` waits for a piped stdin before it starts; it gets none"
    return None


def by_first_line(head: bytes) -> Choice:
    """The adapter for an agent whose first non-blank stdout line (or its head, when over-long) is `head`."""
    if not head.lstrip().startswith(b"{"):
        return Choice("plain", "its first line is not JSON; its output is shown and stored "
                               "(--adapter native would require loopwarden's protocol)")
    kind, obj = _kind(head)
    if kind is None and obj is None:
        return Choice("plain", "its first line is not a JSON object; its output is shown and stored")
    if kind == "hello":
        return Choice("native", "its first line is a loopwarden hello (docs/protocol.md)")
    if kind in EVENT_TYPES:
        # words such as error, done or usage are common in any structured log: only a hello, the protocol's
        # introduction, commits a command to native, whose malformed lines end the session
        return Choice("plain", f"its first line is JSON of type {kind!r} but not a loopwarden hello; its output "
                               "is shown and stored (an agent speaking loopwarden's protocol sends hello first, "
                               "or is run with --adapter native)")
    known = formats.record_formats({"type": kind} if obj is None else obj)
    if "claude-code" in known and (obj is None or "session_id" in obj or "message" in obj or "subtype" in obj):
        return Choice("claude-stream", "its first line is Claude Code stream-json; watched only "
                                       "(--adapter claude-code launches Claude with vetoes)")
    if "codex" in known and kind != "error":  # `codex exec --json` starts with thread.started, never an error
        return Choice("codex-exec", "its first line is a `codex exec --json` event; watched only "
                                    "(--adapter codex runs Codex with vetoes)")
    what = f"of an unknown type {kind!r}" if kind else "without a type"
    return Choice("plain", f"its first line is JSON {what}; its output is shown and stored")


def _kind(head: bytes) -> tuple[str | None, dict[str, object] | None]:
    """A JSON line's `type` and the object; for a line that does not decode (cut short), the first `type`
    field found in it."""
    try:
        obj = protocol.load_object(head)
    except protocol.LineRejected:
        match = formats.TYPE_FIELD.search(head)
        return (match.group(1).decode() if match else None), None
    kind = obj.get("type")
    return (kind if isinstance(kind, str) else None), obj


def silent(seconds: float = SILENCE) -> Choice:
    """Shown while an agent has printed nothing: plain, until its first line says otherwise."""
    return Choice("plain", f"nothing on stdout after {seconds:g} s; its first line may still choose another adapter")


QUIET = Choice("plain", "it printed nothing on stdout")


class AutoAdapter(Adapter):
    """The default: a command known by its command line gets its adapter at launch; any other waits here
    for its first stdout line (runtime/session/reader.py hands the session over then)."""

    name = AUTO
    listed = 0
    agent = "any"
    summary = ("the default: the adapter is chosen from the command (codex app-server, ACP agents) or the first "
               "output line (native, claude-stream, codex-exec), else plain; the session can then do what it can")

    @classmethod
    def launch_command(cls, words: list[str], env: dict[str, str] | None = None) -> list[str]:
        words = Adapter.launch_command(words, env)
        choice = by_command(words, env)
        if choice is None:
            return words
        try:
            return registry.adapters()[choice.adapter].launch_command(words, env)
        except ValueError as exc:
            raise ValueError(f"{choice.line()}; {exc}") from None

    @classmethod
    def launch_env(cls, command: list[str], env: dict[str, str], cwd: str) -> dict[str, str]:
        choice = by_command(command, env)
        return registry.adapters()[choice.adapter].launch_env(command, env, cwd) if choice is not None else {}

    def parse_stdout(self, line: bytes, seq: int) -> list[Event]:
        raise RuntimeError("the session chooses an adapter before it reads a line")  # runtime/session/reader.py
