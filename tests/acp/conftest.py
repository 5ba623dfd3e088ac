"""Fixtures for ACP tests: a real daemon, a work dir and the fake agent's report file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.daemon import Harness


def on_acp(lw: Harness, tmp_path: Path) -> Harness:
    """The harness with a work dir and the fake agent's report file."""
    work = tmp_path / "work"
    work.mkdir()
    lw.work = work  # type: ignore[attr-defined]
    lw.report = tmp_path / "report.jsonl"  # type: ignore[attr-defined]
    lw.env["FAKE_ACP_REPORT"] = str(lw.report)  # type: ignore[attr-defined]
    return lw


@pytest.fixture
def acp(lw: Harness, tmp_path: Path) -> Harness:
    """A daemon of its own for the fake agent (`on_acp`)."""
    return on_acp(lw, tmp_path)
