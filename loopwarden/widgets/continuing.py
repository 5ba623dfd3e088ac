"""The console's keys on a session's own conversation: c continues it, T takes it over."""

from __future__ import annotations

import os
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import SuspendNotSupported

from ..runtime.client import DaemonError
from ..sessions import registry
from ..sessions.base import Handover
from ..supervisor.verdicts import FINAL_STATES

if TYPE_CHECKING:
    from .session_actions import SessionActions

STOP_WAIT = 60.0  # seconds the console waits for the supervised run to stop before the handover

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


class ConsoleTakeover:
    """Key T: the selected session's conversation taken over in its agent's own program, the console suspended
    meanwhile (the terminal is the program's); then an offer to continue the session under supervision."""

    def __init__(self, app: SessionActions) -> None:
        self.app = app

    def offer(self, snap: dict[str, Any]) -> None:
        """Ask to take `snap`'s session over, or say in one line why it cannot be."""
        app = self.app
        if app.is_web or app.is_headless:
            app.notify(f"this console cannot lend its terminal to another program; run 'loopwarden takeover "
                       f"{snap['id']}' in a terminal", severity="warning", markup=False)
            return
        try:
            handover = _handover(snap)
        except ValueError as exc:
            app.notify(f"{snap['id']}: {exc}", severity="warning", markup=False)
            return
        stopped = "" if snap.get("state") in FINAL_STATES else " Its supervised run is stopped first."
        app._confirm(f"Take session {snap['id']} ({snap.get('name')}) over in {Path(handover.argv[0]).name}?{stopped} "
                     "The console comes back when you leave it.",
                     lambda: app.run_worker(partial(self._stop, snap, handover), thread=True, exit_on_error=False))

    def _stop(self, snap: dict[str, Any], handover: Handover) -> None:
        """In a worker: the takeover audited and the run stopped, then the program run on the UI thread."""
        app, sid = self.app, snap["id"]
        try:
            app.feed.request("takeover", session=sid, phase="begin")
            deadline = time.monotonic() + STOP_WAIT
            while app.feed.request("status", session=sid).get("state") not in FINAL_STATES:
                if time.monotonic() > deadline:
                    raise DaemonError(f"the supervised run did not stop within {STOP_WAIT:.0f} s")
                time.sleep(0.2)
        except (DaemonError, OSError) as exc:
            app.call_from_thread(app.notify, f"takeover {sid}: {exc}", severity="error", markup=False)
            return
        app.call_from_thread(self._run, sid, handover, str(snap.get("cwd") or os.getcwd()))

    def _run(self, sid: str, handover: Handover, cwd: str) -> None:
        app = self.app
        code: int | None = None
        try:
            with app.suspend():
                code = subprocess.run(handover.argv, cwd=cwd, env={**os.environ, **handover.env},
                                      check=False).returncode
        except (SuspendNotSupported, OSError) as exc:
            app.notify(f"takeover {sid}: {exc}", severity="error", markup=False)
        app.act("takeover", session=sid, phase="end", note=f"exit code {code}")
        app._confirm(f"Continue session {sid} under loopwarden's supervision?",
                     lambda: app.act("continue", session=sid, env=dict(os.environ)))


def _handover(snap: dict[str, Any]) -> Handover:
    """The agent's program on the session's conversation (its first-run answers written), or ValueError."""
    if ":" in str(snap.get("id")):
        raise ValueError("a session of another host is taken over on that host ('loopwarden takeover' there)")
    cls = registry.adapters().get(str(snap.get("adapter")))
    command, conversation = snap.get("command"), snap.get("conversation")
    if cls is None or not isinstance(command, list) or not conversation:
        raise ValueError("it has no conversation loopwarden can take over")
    return cls.handover(command, str(conversation), str(snap.get("cwd") or os.getcwd()), os.environ)
