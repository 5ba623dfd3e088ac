"""Fixtures for console tests: a real daemon per test (anyio runs them on asyncio: tests/conftest.py)."""

from tests.support.daemon import lw  # noqa: F401
