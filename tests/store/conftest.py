"""Fixtures for the tests of what the daemon keeps on disk."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def umask() -> Iterator[None]:
    """A permissive umask for the test (restored after it), so the modes asserted are the code's own doing."""
    old = os.umask(0o000)
    yield
    os.umask(old)
