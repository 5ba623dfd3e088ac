"""`loopwarden continue`: a new run of an ended or lost session, in the agent's own conversation."""

from __future__ import annotations

import os
import time
from typing import Any

import click

from ..runtime.ending import ending
from ..supervisor.verdicts import FINAL_STATES
from ..supervisor.visible import visible
from .common import DaemonFail, Fail, call

ANSWER_WAIT = 120.0  # seconds to wait for the agent to accept or refuse the conversation


@click.command("continue")
@click.argument("session")
@click.option("--note", help="The next user message of the conversation (default: continue where it left off); "
                             "also recorded in the audit log.")
@click.option("--fresh-counters", is_flag=True, help="Start the loop counters again instead of carrying them over.")
def continue_session(session: str, note: str | None, fresh_counters: bool) -> None:
    """Continue an ended or lost session in the same conversation, through the agent's own resume.

    The new run has the same command, working directory, adapter and settings, and
    this terminal's environment (as 'loopwarden run'; the values of the original's
    are never stored). It waits until the agent accepted the conversation, or says in
    one line why it could not: Claude Code (--resume), Codex (thread/resume) and ACP
    agents that advertise session/resume or session/load continue; others are refused.

    \b
    Examples:
      loopwarden continue s3 --note "the database is up now; run the tests again"
      loopwarden continue fixer --fresh-counters
    """
    result = call("continue", session=session, note=note, fresh_counters=fresh_counters, env=dict(os.environ))
    new = result["id"]
    click.echo(f"{result['continued']}: continued as {new} ({visible(str(result['name']))}) in conversation "
               f"{visible(str(result['conversation']))}")
    if result.get("fresh_counters") and not fresh_counters:
        click.echo("its counters start fresh (they could not be carried over)")
    if result.get("missing_env"):
        click.echo(click.style("loopwarden: warning: this environment lacks variables the earlier run had: "
                               + ", ".join(visible(str(n)) for n in result["missing_env"]), fg="yellow"), err=True)
    snap = _answered(new)
    if snap.get("resume") != "accepted":
        why = snap.get("failure") or (ending(snap) if snap.get("state") in FINAL_STATES else None)
        raise Fail(f"{new}: the agent did not continue conversation {result['conversation']}"
                   + (f": {visible(str(why))}" if why else ""))


def _answered(sid: str) -> dict[str, Any]:
    """The new run's snapshot once its agent accepted or refused the conversation, or its run ended."""
    deadline = time.monotonic() + ANSWER_WAIT
    while True:
        try:
            snap: dict[str, Any] = call("status", session=sid)
        except DaemonFail:
            raise
        if snap.get("resume") != "waiting" or snap.get("state") in FINAL_STATES:
            return snap
        if time.monotonic() > deadline:
            raise Fail(f"{sid}: the agent has not answered for {ANSWER_WAIT:.0f} s; see 'loopwarden logs {sid}'")
        time.sleep(0.2)
