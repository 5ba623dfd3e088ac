"""Kept agents (`[daemon] keep_agents = true`) in tests: the daemon killed and the session taken up again."""

from __future__ import annotations

import os
import signal
from typing import Any

from tests.keeper.test_durable import other_daemon
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.waiting import wait_for


def killed_and_taken_up(lw: Harness, sid: str, how: str = "sigkill") -> dict[str, Any]:
    """SIGKILL the daemon (or `how` = "restart-daemon": hand it over); once the keeper's next daemon answers and has
    taken the session up, its snapshot."""
    assert lw.daemon is not None
    old = lw.daemon.pid
    if how == "restart-daemon":
        done = lw.cli("restart-daemon", "--yes")
        assert done.returncode == 0 and "1 kept sessions taken up" in done.stdout, done
    else:
        os.kill(old, signal.SIGKILL)
        lw.daemon.wait()
    other_daemon(lw, old)
    wait_for(lambda: lw.request("ping")["keeper"]["taken_up"] == 1, 30, "the session taken up")
    return dict(wait_for(lambda: (snap := lw.status(sid))["state"] != "starting" and snap, 30,
                         "the session supervised again"))


def stored_once(lw: Harness, sid: str) -> list[dict[str, Any]]:
    """The session's tool calls, each stored exactly once (by call id and by line)."""
    calls = of_kind(lw, sid, "tool_call")
    ids = [c["call_id"] for c in calls]
    assert len(ids) == len(set(ids)), ids
    assert len({c["seq"] for c in calls}) == len(calls)
    return calls
