"""Fixtures for the built-in agent's tests: a real daemon and the fake Messages API."""

from tests.fakes.anthropic_server import fake_api  # noqa: F401
from tests.support.daemon import lw  # noqa: F401
