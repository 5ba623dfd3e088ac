"""Fixtures for Codex tests: the real CLI, the fake Responses API, a private CODEX_HOME, a real daemon."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.codex.codex_home import codex_bin, write_codex_home  # noqa: F401
from tests.codex.fake_responses import FakeResponses, fake_model  # noqa: F401
from tests.support.daemon import Harness


@pytest.fixture
def codex_home(tmp_path: Path, fake_model: FakeResponses) -> Path:  # noqa: F811
    """A CODEX_HOME for this test, its config pointing at the fake model."""
    return write_codex_home(tmp_path / "codex-home", fake_model.url)


@pytest.fixture
def cx(lw: Harness, codex_home: Path, codex_bin: str, tmp_path: Path) -> Iterator[Harness]:  # noqa: F811
    """The harness, set up so `loopwarden run --adapter codex` runs the real CLI on the fake model,
    with a private CODEX_HOME (also its HOME) and a working directory of its own."""
    work = tmp_path / "work"
    work.mkdir()
    lw.env.update({"HOME": str(codex_home), "CODEX_HOME": str(codex_home), "LOOPWARDEN_CODEX": codex_bin})
    lw.work = work  # type: ignore[attr-defined]
    yield lw
