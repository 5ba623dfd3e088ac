"""What the live tests share."""

from __future__ import annotations

from pathlib import Path

from tests.support.waiting import wait_for


def verdict_on_call(folder: Path, n: int) -> str:
    """Let tests/agents/paced_caller.py (working in `folder`) make its call number `n`; the verdict it got."""
    (folder / f"go{n}").touch()
    return wait_for(lambda: (folder / f"verdict{n}").exists() and (folder / f"verdict{n}").read_text(),
                    what=f"the verdict on call {n}")
