"""Stories every launched agent's tests tell the same way, checked in one place."""

from __future__ import annotations

from typing import Any

from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.waiting import wait_for


def assert_the_clock_alone_ends_it(lw: Harness, sid: str, timeout: float = 60) -> dict[str, Any]:
    """The session keeps calling tools; once it has made three (however slow the machine), the operator gives
    it a wall-clock limit two seconds ahead, and the clock alone ends it (within `timeout` seconds) while it
    is still going. Its last snapshot."""
    wait_for(lambda: len(of_kind(lw, sid, "tool_call")) >= 3, timeout=60, what="three tool calls")
    so_far = lw.status(sid)["runtime"]
    limit = so_far + 2.0
    assert lw.cli("set", sid, f"limits.max_runtime={limit:.1f}s").returncode == 0
    snap = lw.wait_state(sid, "terminated", "exited", timeout=timeout)
    assert (snap["state"], snap["termination"]) == ("terminated", "max_runtime"), snap
    # not before the limit; and soon after it, "soon" measured against this run's own pace (how long its
    # first three calls took), since a busy machine slows the daemon and the agent alike
    assert limit - 0.1 <= snap["runtime"] < limit + max(5.0, 2 * so_far)
    assert len(of_kind(lw, sid, "tool_call")) > 3  # it kept going until the clock stopped it
    return snap


def opened_gate(lw: Harness) -> str:
    """A scripted session that loops until it opens a gate; that gate (`session:gate`), still pending."""
    sid = lw.scenario("loop_gate")
    snap = lw.wait_state(sid, "gated")
    return f"{sid}:{snap['pending_gates'][0]}"
