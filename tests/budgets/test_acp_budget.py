"""An ACP agent under a reached day budget: its permission request waits behind the budget gate, unanswered, until
the budget is raised; a real daemon and the scripted fake ACP agent."""

from __future__ import annotations

from pathlib import Path

from tests.acp.conftest import on_acp
from tests.acp.helpers import start
from tests.budgets.conftest import Start, budget_gate, spender
from tests.support.events import of_kind


def test_an_acp_permission_request_waits_for_a_reached_day_budget(daemon: Start, tmp_path: Path) -> None:
    lw = on_acp(daemon(budgets={"day_usd": 0.3}), tmp_path)
    native = spender(lw, tmp_path / "calls", 0.2, name="native")
    budget_gate(lw, native)  # $0.40 of $0.30 spent today
    sid = start(lw, "once")  # one call, `touch held-marker`, asked for permission first
    gate = budget_gate(lw, sid)
    assert gate["evidence"]["budget"] == "day"
    marker = lw.work / "held-marker"  # type: ignore[attr-defined]
    assert lw.status(sid)["state"] == "gated" and not marker.exists()
    assert not of_kind(lw, sid, "tool_result")
    assert lw.cli("set", "budgets.day_usd=0").returncode == 0  # the day budget off: released
    snap = lw.wait_state(sid, "exited", "terminated", timeout=30)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert marker.exists(), "the released call ran"
    lw.request("kill", session=native)
