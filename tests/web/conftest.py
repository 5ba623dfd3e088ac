"""Fixtures for the web console's tests: a real daemon (tests/live), `loopwarden web` on a free port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import Harness
from tests.web.web_harness import WebServer


@pytest.fixture
def web(lw: Harness) -> Iterator[WebServer]:
    server = WebServer(lw)
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def browser_profile(tmp_path: Path) -> Path:
    from tests.web.browser import missing

    why = missing()
    if why:
        pytest.skip(why)
    return tmp_path / "chromium-profile"


