"""Fixtures for Gemini tests: the real Gemini CLI, the fake Gemini API, a private HOME."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.gemini.fake_gemini import FakeGemini, fake_gemini  # noqa: F401
from tests.gemini.gemini_home import write_gemini_home


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
