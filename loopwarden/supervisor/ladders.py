"""Model escalation ladders: each agent climbs its own provider's models, cheapest first.

`escalation.models` set names one ladder for every agent; else `escalation.ladders` may name one per agent
("gemini=gemini-3.5-flash-lite,gemini-3.8-flash,gemini-3.1-pro-preview"); else the agent's adapter brings its
own (`Adapter.ladder`); else DEFAULT (Claude's aliases, what a native agent is told to climb)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .config import Config

DEFAULT: Final = ("haiku", "sonnet", "opus")
# The adapters' own ladders (model ids as supervisor/prices.py knows them, checked 2026-12-06).
ANTHROPIC: Final = DEFAULT  # Claude Code and claude-agent-acp take these aliases for the latest of each
OPENAI: Final = ("gpt-5.4-mini", "gpt-5.4", "gpt-5.5")
GEMINI: Final = ("gemini-3.5-flash-lite", "gemini-3.8-flash", "gemini-3.1-pro-preview")
OWN: Final = frozenset({DEFAULT, ANTHROPIC, OPENAI, GEMINI})  # an agent's default: never "retuned" (explain)


class LadderError(ValueError):
    """An `escalation.ladders` entry that cannot be read; the message says which and why."""


def parse_entry(entry: str) -> tuple[str, tuple[str, ...]]:
    """'AGENT=MODEL,MODEL,...' as (agent, models), or LadderError."""
    agent, sep, models = entry.partition("=")
    names = tuple(m.strip() for m in models.split(",") if m.strip())
    if not sep or not agent.strip() or not names:
        raise LadderError(f"{entry!r} is not AGENT=MODEL,MODEL,..., e.g. gemini=gemini-3.5-flash-lite,gemini-3.8-flash")
    return agent.strip(), names


def ladder_for(models: Sequence[str], ladders: Sequence[str], agent: str | None,
               own: Sequence[str] = ()) -> tuple[str, ...]:
    """The ladder `agent` climbs: `models` (for every agent), its `ladders` entry, its adapter's own, DEFAULT."""
    if models:
        return tuple(models)
    for entry in reversed(ladders):  # a later entry (a --set after the file's) wins
        name, names = parse_entry(entry)
        if name == agent:
            return names
    return tuple(own) or DEFAULT


def for_agent(config: Config, agent: str | None, own: Sequence[str] = ()) -> Config:
    """`config` with the ladder `agent` climbs written into `escalation.models` (what the session judges by)."""
    esc = config.escalation
    ladder = ladder_for(esc.models, esc.ladders, agent, own)
    return config if list(ladder) == esc.models else replace(config, escalation=replace(esc, models=list(ladder)))
