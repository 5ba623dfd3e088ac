"""Fixtures for console tests: a real daemon per test (anyio runs them on asyncio: tests/conftest.py)."""

from tests.live.live_harness import lw  # noqa: F401
