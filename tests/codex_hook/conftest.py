"""Fixtures for Codex attached by its hook: a real daemon, the real Codex CLI, the fake Responses API."""

from __future__ import annotations

from tests.codex.codex_home import codex_bin  # noqa: F401
from tests.codex.fake_responses import fake_model  # noqa: F401
