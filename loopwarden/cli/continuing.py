"""`loopwarden continue`: a new run of an ended or lost session, in the agent's own conversation; and
`loopwarden takeover`: that conversation in the agent's own interactive program, in this terminal."""

from __future__ import annotations

import os
import subprocess
import sys
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
    _continue(session, note, fresh_counters)


def _continue(session: str, note: str | None, fresh_counters: bool) -> None:
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


@click.command("takeover")
@click.argument("session")
@click.option("--then", "then", type=click.Choice(["ask", "continue", "stop"]), default="ask", show_default=True,
              help="Once you leave the agent's program: ask whether to continue under supervision, continue, or "
                   "leave the session stopped.")
def takeover(session: str, then: str) -> None:
    """Take a session's conversation over in the agent's own interactive program, here.

    The supervised run is stopped first (its turn interrupted), then the agent's program
    opens on the same conversation in this terminal (claude --resume, codex resume,
    gemini --resume), its first-run questions answered in your own settings files. Your
    turns there are yours: loopwarden does not judge them. When you leave it, the
    session can continue under supervision ('loopwarden continue'). Both handovers are
    in the audit log.

    \b
    Examples:
      loopwarden takeover s3
      loopwarden takeover fixer --then continue
    """
    from ..sessions.registry import adapters

    snap = call("status", session=session)
    sid, conversation = str(snap.get("id")), snap.get("conversation")
    if not conversation:
        raise Fail(f"session {sid} has no conversation id, so it cannot be taken over in its agent's own program")
    cls = adapters().get(str(snap.get("adapter")))
    if cls is None or not isinstance(snap.get("command"), list):
        raise Fail(f"session {sid} was not launched by an adapter this loopwarden has")
    cwd = str(snap.get("cwd") or os.getcwd())
    try:
        handover = cls.handover(snap["command"], str(conversation), cwd, os.environ)
    except ValueError as exc:
        raise Fail(f"session {sid}: {exc}") from None
    begun = call("takeover", session=sid, phase="begin")
    if begun.get("stopping"):
        click.echo(f"{sid}: stopping the supervised run ...")
        _ended(sid)
    click.echo(f"{sid}: conversation {visible(str(conversation))} in {visible(' '.join(handover.argv[:1]))}; "
               "leave it to hand the session back")
    try:
        code = subprocess.run(handover.argv, cwd=cwd, env={**os.environ, **handover.env}, check=False).returncode
    except OSError as exc:
        code = None
        click.echo(f"loopwarden: cannot start {visible(handover.argv[0])}: {exc.strerror or exc}", err=True)
    call("takeover", session=sid, phase="end", note=f"exit code {code}")
    if then == "continue" or (then == "ask" and sys.stdin.isatty()
                              and click.confirm(f"Continue {sid} under loopwarden's supervision?", default=True)):
        _continue(sid, None, False)
    else:
        click.echo(f"{sid}: stopped; continue it later with 'loopwarden continue {sid}'")


def _ended(sid: str) -> None:
    """Until the session's run has ended (bounded)."""
    deadline = time.monotonic() + ANSWER_WAIT
    while call("status", session=sid).get("state") not in FINAL_STATES:
        if time.monotonic() > deadline:
            raise Fail(f"{sid}: the supervised run did not stop within {ANSWER_WAIT:.0f} s; see 'loopwarden "
                       f"status {sid}'")
        time.sleep(0.2)
