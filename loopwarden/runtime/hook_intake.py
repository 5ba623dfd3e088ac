"""What the daemon checks before a hook event makes a new attached session: its settings and its bounds.

Hook events come from the agent's side (any process can send one), so a hook request may make its session
stricter than the operator's configuration, never looser (supervisor/tighten.py), and the sessions hooks
can make are bounded: in total and per agent process (hooks.max_sessions, hooks.max_per_agent), each
refused in one line. A hook run inside a session loopwarden launched or adopted makes no session at all:
that session already judges the agent, and its tools could otherwise forge sessions without end.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..paths import Paths
from ..supervisor.config import Config, ConfigError, Hooks, load_config
from ..supervisor.tighten import tightened
from .hooked import HookedSession
from .procfs import ProcId


def operator_config(paths: Paths) -> Config:
    """The operator's own configuration: the profile's config file, then the daemon's environment
    (ConfigError names what is wrong)."""
    path = paths.config_file
    return load_config(file=path if path.exists() else None)


def hook_config(paths: Paths, asked_env: Any) -> tuple[Config, list[str]]:
    """A new hook session's configuration: the operator's, with what the hook's LOOPWARDEN_* variables make
    stricter; and the values refused as looser (ConfigError when either cannot be read)."""
    operator = operator_config(paths)
    if not isinstance(asked_env, Mapping) or not asked_env:
        return operator, []
    asked = {str(k): str(v) for k, v in asked_env.items() if str(k).startswith("LOOPWARDEN_")}
    daemon_env = {k: v for k, v in os.environ.items() if k.startswith("LOOPWARDEN_")}
    path = paths.config_file
    requested = load_config(file=path if path.exists() else None, env={**daemon_env, **asked})
    return tightened(operator, requested)


def bound_refusal(sessions: Iterable[HookedSession], agent: ProcId | None, hooks: Hooks) -> str | None:
    """Why a new hook session may not start (one line), or None: the bounds on live hook sessions."""
    live = [s for s in sessions if not s.final]
    if hooks.max_sessions and len(live) >= hooks.max_sessions:
        return (f"refused: {len(live)} sessions attached by hooks are live, the most allowed "
                "(hooks.max_sessions); end some, or raise it in the operator's config file")
    if not hooks.max_per_agent:
        return None
    same = [s for s in live if (agent in s.agents if agent is not None else not s.agents)]
    if len(same) < hooks.max_per_agent:
        return None
    whose = f"agent process {agent.pid}" if agent is not None else "hooks whose agent process cannot be told"
    return (f"refused: {whose} has {len(same)} live hook sessions, the most allowed (hooks.max_per_agent); "
            "they end on SessionEnd, when the agent exits, or after hooks.idle_timeout")


def config_refusal(exc: ConfigError) -> str:
    return f"the operator's configuration cannot be read: {exc}"
