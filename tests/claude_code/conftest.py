"""Fixtures for tests of Claude Code launched by loopwarden: the real CLI, the fake API, a real daemon."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwarden.sessions.claude_launch import bundled_binary
from tests.fakes.anthropic_server import FakeAnthropic
from tests.support.daemon import Harness

# protocols.md 4.4: no stray traffic, no updates, no telemetry
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
         "DISABLE_ERROR_REPORTING": "1"}


@pytest.fixture(scope="session")
def claude_bin() -> str:
    """The real Claude Code CLI from the claude-agent-sdk wheel (the `test` extra), checked to run."""
    path = bundled_binary()
    if path is None:
        pytest.skip("the Claude Code CLI is not installed: pip install claude-agent-sdk "
                    "(it bundles claude_agent_sdk/_bundled/claude)")
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False,
                              env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent", **QUIET})
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"the bundled Claude Code CLI cannot run here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"the bundled Claude Code CLI cannot run here: {done.stderr.strip()[:200]}")
    return path


def on_the_fake_api(harness: Harness, fake_api: FakeAnthropic, claude_bin: str, tmp_path: Path) -> Harness:
    """`harness` set up so `loopwarden run --adapter claude-code` runs the real CLI on the fake API, with a
    temporary HOME and working directory (`harness.work`)."""
    home = tmp_path / "claude-home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    harness.env.update({**fake_api.env(), **QUIET, "HOME": str(home), "LOOPWARDEN_CLAUDE": claude_bin})
    harness.work = work  # type: ignore[attr-defined]
    return harness


@pytest.fixture
def cc(lw: Harness, fake_api: FakeAnthropic, claude_bin: str, tmp_path: Path) -> Iterator[Harness]:
    """The harness, set up so `loopwarden run --adapter claude-code` runs the real CLI on the fake API,
    with a temporary HOME and working directory."""
    yield on_the_fake_api(lw, fake_api, claude_bin, tmp_path)
