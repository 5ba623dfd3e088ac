"""Adapters: one per kind of agent, turning its stream into events and verdicts into its input."""

from __future__ import annotations

from .claude_live import ClaudeCodeAdapter
from .native import NativeAdapter
from .plain import PlainAdapter

ADAPTERS = {"native": NativeAdapter, "plain": PlainAdapter, "claude-code": ClaudeCodeAdapter}
