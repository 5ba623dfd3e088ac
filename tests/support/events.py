"""What a daemon stored about a session, read the way the tests assert on it."""

from __future__ import annotations

from typing import Any

from tests.support.daemon import Harness


def of_kind(lw: Harness, sid: str, kind: str) -> list[dict[str, Any]]:
    """The data of the session's stored events of one kind (`tool_call`, `assistant_message`, ...), in order."""
    return [e["data"] for e in lw.events(sid) if e["kind"] == kind]


def rules(verdicts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each verdict as (action, rule): what was done, and which rule did it."""
    return [(v["action"], v["rule"]) for v in verdicts]


def heard(lw: Harness, sid: str, text: str) -> bool:
    """The session's scripted agent read `text` on its stdin (it logs every line it reads to stderr, stored as
    log records)."""
    return any(text in str(e.get("data", {}).get("text", "")) for e in lw.events(sid) if e["kind"] == "log")
