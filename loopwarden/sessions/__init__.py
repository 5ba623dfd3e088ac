"""Adapters: one per kind of agent, turning its stream into events and verdicts into its input."""

from __future__ import annotations

from .native import NativeAdapter
from .plain import PlainAdapter

ADAPTERS = {"native": NativeAdapter, "plain": PlainAdapter}
