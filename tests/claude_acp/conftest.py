"""Fixtures for Claude Code over ACP launched by loopwarden: the real adapter (node), the fake API, a real daemon."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.npm_agents import claude_acp_bin
from tests.claude_code.conftest import QUIET
from tests.fakes.anthropic_server import FakeAnthropic
from tests.support.daemon import Harness


@pytest.fixture(scope="session")
def claude_acp(npm_agents_root: Path) -> str:
    """The real claude-agent-acp 0.23.1 in the project's `.agents/` (installed by npm on first use)."""
    found = claude_acp_bin(npm_agents_root)
    if found is None or shutil.which("node") is None:
        pytest.skip("claude-agent-acp or node is missing after the npm install")
    return found


@pytest.fixture
def ca(lw: Harness, fake_api: FakeAnthropic, claude_acp: str, tmp_path: Path) -> Iterator[Harness]:
    """The harness, set up so `loopwarden run --agent claude-acp` starts the real adapter on the fake API,
    with a temporary HOME (where the user's login and settings live) and working directory."""
    home = tmp_path / "claude-home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    lw.env.update({**fake_api.env(), **QUIET, "HOME": str(home), "LOOPWARDEN_CLAUDE_ACP": claude_acp})
    lw.home_dir = home  # type: ignore[attr-defined]
    lw.work = work  # type: ignore[attr-defined]
    yield lw
