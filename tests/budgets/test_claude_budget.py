"""The real Claude Code CLI on the fake Messages API: the cost it reports reaches the session's budget, and its
next call waits in its PreToolUse hook behind the budget gate until the budget is raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.budgets.conftest import budget_gate
from tests.claude_code.conftest import claude_bin, on_the_fake_api  # noqa: F401 - the CLI fixture
from tests.fakes.anthropic_server import FakeAnthropic, Turn, assistant_turns, call, say
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)


def _model(body: dict[str, Any]) -> Turn:
    """Two calls in the first turn (cut by --max-turns); in the next, one that leaves a marker; then done."""
    turns = assistant_turns(body)
    if turns >= 3:
        return say("Done.")
    if turns == 2:
        return call("Bash", {"command": "touch budget-marker", "description": "mark"})
    return call("Bash", {"command": ["ls", "pwd"][turns], "description": "look around"})


def test_the_cost_claude_reports_holds_its_next_call_until_the_budget_is_raised(
        lw: Harness, fake_api: FakeAnthropic, claude_bin: str, tmp_path: Path) -> None:  # noqa: F811
    cc = on_the_fake_api(lw, fake_api, claude_bin, tmp_path)
    fake_api.play(_model, max_turns=20)
    # the first turn ends unfinished (--max-turns 2): a failed iteration, which with a one-model ladder and
    # failures_at_top=1 calls a human (gate g1) and starts the next turn with the escalation's text; its result
    # reports the turn's cost, past the tiny budget
    sid = cc.run_detached("--max-turns", "2", "--allowedTools=Bash", "look around", adapter="claude-code",
                          name="cc", cwd=cc.work,  # type: ignore[attr-defined]
                          sets=("limits.max_cost_usd=0.000001", "escalation.models=sonnet",
                                "escalation.failures_at_top=1"))
    gate = budget_gate(cc, sid, "g2", timeout=60)
    assert gate["reason"].startswith("the session's cost budget is reached: $")
    held = wait_for(lambda: next((c for c in of_kind(cc, sid, "tool_call") if "touch" in str(c["args"])), None),
                    30, "the held tool call")
    assert cc.cli("approve", f"{sid}:g1").returncode == 0  # the escalation's gate: the budget's still holds
    marker = cc.work / "budget-marker"  # type: ignore[attr-defined]
    assert cc.status(sid)["state"] == "gated" and not marker.exists()
    assert held["call_id"] not in {r.get("call_id") for r in of_kind(cc, sid, "tool_result")}
    proc = cc.cli("set", sid, "limits.max_cost_usd=100")
    assert proc.returncode == 0, proc.stderr
    snap = cc.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert marker.exists(), "the released call ran"
    assert held["call_id"] in {r.get("call_id") for r in of_kind(cc, sid, "tool_result")}
