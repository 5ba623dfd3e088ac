"""Fixtures for Codex tests: the real CLI, the fake Responses API, a private CODEX_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codex.codex_home import codex_bin, write_codex_home  # noqa: F401
from tests.codex.fake_responses import FakeResponses, fake_model  # noqa: F401


@pytest.fixture
def codex_home(tmp_path: Path, fake_model: FakeResponses) -> Path:  # noqa: F811
    """A CODEX_HOME for this test, its config pointing at the fake model."""
    return write_codex_home(tmp_path / "codex-home", fake_model.url)
