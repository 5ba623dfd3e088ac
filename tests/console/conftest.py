"""Fixtures for console tests: a real daemon per test, anyio on asyncio."""

import pytest

from tests.live.live_harness import lw  # noqa: F401


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
