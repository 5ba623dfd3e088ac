"""Fixtures for the attached (hook) path of Claude Code: a real daemon, the fake API, the real CLI."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import fake_api  # noqa: F401
from tests.live.live_harness import lw  # noqa: F401

# protocols.md 4.4: no stray traffic, no updates, no telemetry
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
         "DISABLE_ERROR_REPORTING": "1"}


@pytest.fixture(scope="session")
def claude_bin() -> str:
    """The real Claude Code CLI bundled in the claude-agent-sdk wheel (the `test` extra), checked to run."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    path = Path(spec.origin).parent / "_bundled" / "claude" if spec and spec.origin else None
    if path is None or not os.access(path, os.X_OK):
        pytest.skip("the Claude Code CLI is not installed: pip install claude-agent-sdk "
                    "(it bundles claude_agent_sdk/_bundled/claude)")
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60, check=False,
                              env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", **QUIET})
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"the bundled Claude Code CLI cannot run here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"the bundled Claude Code CLI cannot run here: {done.stderr.strip()[:200]}")
    return str(path)
