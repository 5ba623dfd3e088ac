"""The pinned real ACP agents install into the project's `.agents/` folder and are found by the shortcuts."""

from __future__ import annotations

from pathlib import Path

from loopwarden.sessions import acp_agents
from tests.agents import npm_agents


def test_the_pinned_agents_are_installed_and_found_by_the_shortcuts(npm_agents_root: Path) -> None:
    assert npm_agents.missing(npm_agents_root) == {}
    gemini, claude = npm_agents.gemini_bin(npm_agents_root), npm_agents.claude_acp_bin(npm_agents_root)
    assert gemini and claude
    env = {"PATH": "", acp_agents.ENV_AGENTS_DIR: str(npm_agents_root)}
    assert acp_agents.shortcut_words("gemini", ["go"], env, "/w")[:2] == [gemini, "--acp"]
    assert acp_agents.shortcut_words("claude-acp", ["go"], env, "/w")[0] == claude
    assert npm_agents.install(npm_agents_root) == npm_agents_root  # a second call downloads nothing
