"""Agents that print their own JSON-lines stream, watched only: loopwarden reads it and never answers.

`claude -p --output-format stream-json --verbose` and `codex exec --json`, run as typed (found by
their first line when no adapter is given, sessions/detect.py). Their tool calls, results, usage and
turns are judged like any other; a block becomes nothing the agent reads, so a gate or a terminate
acts on the process (SIGSTOP, SIGTERM). The launched adapters (`claude-code`, `codex`) can veto.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import ClassVar

from ..supervisor import ladders
from ..supervisor.events import Event
from .base import Adapter, Capability
from .claude_code import ClaudeCodeParser, array_events
from .codex import CodexParser
from .recorded import RecordParser, launch_model


class ObservedAdapter(Adapter):
    """A recorded-stream parser over a live agent's stdout."""

    parser_class: ClassVar[type[RecordParser]]
    declared = Capability.NONE

    def __init__(self) -> None:
        super().__init__()
        self.parser = self.parser_class()

    def parse_stdout(self, line: bytes, seq: int) -> list[Event]:
        return self.parser.parse_line(line, seq)

    @classmethod
    def replay_parser(cls) -> Callable[[bytes, int], list[Event]]:
        return cls.parser_class().parse_line


class ClaudeStreamAdapter(ObservedAdapter):
    name = "claude-stream"
    listed = 6
    agent = "claude-code"
    ladder = ladders.ANTHROPIC
    summary = "Claude Code run as typed with --output-format stream-json: watched, no vetoes"
    parser_class = ClaudeCodeParser
    replay_format = "claude-code"  # claude -p --output-format stream-json --verbose, or its JSON array
    reads_arrays = True

    @classmethod
    def array_events(cls, data: bytes) -> Iterator[list[Event]]:
        return array_events(data)


class CodexExecAdapter(ObservedAdapter):
    name = "codex-exec"
    listed = 7
    agent = "codex"
    ladder = ladders.OPENAI
    summary = "`codex exec --json` run as typed: watched, no vetoes"
    parser_class = CodexParser
    replay_format = "codex"

    def command(self, argv: list[str]) -> list[str]:
        """As typed; its `-m`/`--model` names the model its usage is priced as (the stream never does)."""
        model = launch_model(argv)
        if model is not None and isinstance(self.parser, CodexParser):
            self.parser.model = model
        return list(argv)
