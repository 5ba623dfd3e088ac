"""Fixtures for tests that run a real daemon."""

from tests.support.daemon import lw  # noqa: F401
