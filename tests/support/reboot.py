"""A simulated reboot of a profile: every process it started killed at once, then its daemon started again."""

from __future__ import annotations

import os
import signal
import sqlite3
from contextlib import closing
from typing import Any

import psutil

from tests.support.daemon import Harness
from tests.support.processes import gone
from tests.support.waiting import wait_for


def profile_processes(lw: Harness) -> list[psutil.Process]:
    """The daemon, its guardian, and every agent and child whose environment names the profile."""
    home, socket = str(lw.home), os.path.realpath(lw.paths.socket)
    found = []
    for proc in psutil.process_iter():
        try:
            env = proc.environ()
        except psutil.Error:
            continue
        if env.get("LOOPWARDEN_HOME") == home or env.get("LOOPWARDEN_SESSION_DAEMON") == socket:
            found.append(proc)
    return found


def reboot(lw: Harness) -> None:
    """SIGKILL every process of the profile at once (no daemon, guardian or agent gets to clean up), wait until
    they are gone, then start the daemon again."""
    victims = profile_processes(lw)
    for proc in victims:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    if lw.daemon is not None:
        lw.daemon.wait(10)
    wait_for(lambda: all(gone(p.pid) for p in victims), 20, "every process of the profile to be gone")
    lw.start()


def stored(lw: Harness, sid: str) -> dict[str, Any]:
    """The session's row as the store file holds it (read-only, beside the daemon)."""
    with closing(sqlite3.connect(f"file:{lw.paths.database}?mode=ro", uri=True)) as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM sessions WHERE id = ?", [sid]).fetchone()
        return dict(row) if row else {}
