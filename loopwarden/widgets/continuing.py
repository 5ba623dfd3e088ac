"""What the console says about continuing a session in its agent's own conversation (key c)."""

from __future__ import annotations

from typing import Any

from ..supervisor.verdicts import FINAL_STATES

CONTINUE_NOTE = "the agent's next message, also for the audit log (optional)"


def continue_refusal(snap: dict[str, Any] | None) -> str | None:
    """Why the selected session cannot be continued, in one line; None when it can."""
    if snap is None:
        return "no session selected"
    if snap.get("state") not in FINAL_STATES:
        return f"{snap['id']} is still running; only an ended or lost session continues"
    if not snap.get("resumable"):
        return f"{snap['id']} cannot be continued: its agent reported no conversation loopwarden can resume"
    return None


def continue_question(snap: dict[str, Any]) -> str:
    return (f"Continue session {snap['id']} ({snap.get('name')}) in its agent's conversation "
            f"{snap.get('conversation')}, as a new session?")
