"""Fixtures for tests that run a real daemon."""

from tests.live.live_harness import lw  # noqa: F401
