"""The fake Messages API and a real daemon, for the second-opinion tests."""

from tests.fakes.anthropic_server import fake_api  # noqa: F401
from tests.support.daemon import lw  # noqa: F401
