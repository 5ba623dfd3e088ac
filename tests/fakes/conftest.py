"""The fake Messages API as a fixture for the tests in this folder."""

from tests.fakes.anthropic_server import fake_api  # noqa: F401
