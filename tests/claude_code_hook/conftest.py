"""Fixtures for the attached (hook) path of Claude Code: a real daemon, the fake API, the real CLI
(located and checked as for the launched path)."""

from __future__ import annotations

from tests.claude_code.conftest import QUIET, claude_bin  # noqa: F401
