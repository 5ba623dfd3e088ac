"""Fixtures for Gemini tests: the real Gemini CLI, the fake Gemini API, a private HOME, a real daemon."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import npm_agents
from tests.gemini.fake_gemini import FakeGemini, fake_gemini  # noqa: F401
from tests.gemini.gemini_home import gemini_env, write_gemini_home
from tests.support.daemon import Harness


@pytest.fixture(scope="session")
def gemini_bin(npm_agents_root: Path) -> str:
    """The real Gemini CLI 0.61.0 from the project's npm folder (installed on first use; skipped without npm)."""
    path = npm_agents.gemini_bin(npm_agents_root)
    assert path, f"no gemini in {npm_agents_root}/node_modules/.bin after the install"
    return path


@pytest.fixture
def gemini_home(tmp_path: Path) -> Path:
    """A private HOME with offline Gemini settings."""
    return write_gemini_home(tmp_path / "gemini-home")


def on_gemini(lw: Harness, gemini_home: Path, gemini_bin: str, fake: FakeGemini, tmp_path: Path) -> Harness:
    """The harness, set up so `loopwarden run --agent gemini` starts the real Gemini CLI on the fake API,
    with a private HOME and a working directory of its own."""
    work = tmp_path / "work"
    work.mkdir()
    lw.env.update(gemini_env(gemini_home, fake.url))
    lw.env["LOOPWARDEN_GEMINI"] = gemini_bin
    lw.work = work  # type: ignore[attr-defined]
    return lw


@pytest.fixture
def gm(lw: Harness, gemini_home: Path, gemini_bin: str, fake_gemini: FakeGemini,  # noqa: F811
       tmp_path: Path) -> Harness:
    """A daemon of its own, on the real Gemini CLI (`on_gemini`)."""
    return on_gemini(lw, gemini_home, gemini_bin, fake_gemini, tmp_path)
