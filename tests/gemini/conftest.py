"""Fixtures for Gemini tests: the real Gemini CLI, the fake Gemini API, a private HOME, a real daemon."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from loopwarden.sessions import acp_gemini
from tests.gemini.fake_gemini import FakeGemini, fake_gemini  # noqa: F401
from tests.gemini.gemini_home import gemini_env, write_gemini_home
from tests.live.live_harness import Harness, lw  # noqa: F401


@pytest.fixture(scope="session")
def gemini_bin() -> str:
    """The real Gemini CLI; the test is skipped, saying why, when it cannot be had."""
    chosen = os.environ.get("LOOPWARDEN_TEST_GEMINI")
    if chosen:
        return chosen
    if shutil.which("npm") is None:
        pytest.skip("npm is missing: the Gemini CLI tests need node and npm to install @google/gemini-cli")
    pytest.skip("set LOOPWARDEN_TEST_GEMINI to a gemini 0.61.0 binary")


@pytest.fixture
def gemini_home(tmp_path: Path) -> Path:
    """A private HOME with offline Gemini settings."""
    return write_gemini_home(tmp_path / "gemini-home")


@pytest.fixture
def gm(lw: Harness, gemini_home: Path, gemini_bin: str, fake_gemini: FakeGemini,  # noqa: F811
       tmp_path: Path) -> Harness:
    """The harness, set up so `loopwarden run` starts the real Gemini CLI on the fake API, with a private
    HOME and a working directory of its own."""
    work = tmp_path / "work"
    work.mkdir()
    lw.env.update(gemini_env(gemini_home, fake_gemini.url))
    layer = acp_gemini.layer_args(lw.env, str(work))
    lw.launch = ["--adapter", "acp"]  # type: ignore[attr-defined]
    lw.agent_words = [gemini_bin, "--acp", *layer, "--"]  # type: ignore[attr-defined]
    lw.work = work  # type: ignore[attr-defined]
    return lw
