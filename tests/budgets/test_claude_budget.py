"""The real Claude Code CLI on the fake Messages API: each call's usage reaches the session's budget as it comes
(not only at the turn's end), and its next call waits in its PreToolUse hook behind the budget gate until the
budget is raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loopwarden.supervisor.prices import SHIPPED_TABLE
from tests.budgets.conftest import budget_gate
from tests.claude_code.conftest import claude_bin, on_the_fake_api  # noqa: F401 - the CLI fixture
from tests.fakes.anthropic_server import FakeAnthropic, Turn, assistant_turns, call, say
from tests.support.daemon import Harness
from tests.support.events import of_kind

pytestmark = pytest.mark.timeout(120)
MODEL = "claude-sonnet-4-5-20250929"


def _one_turn(body: dict[str, Any]) -> Turn:
    """Three calls in one turn of `claude -p` (no turn ends before the last), the last leaving a marker."""
    turns = assistant_turns(body)
    if turns >= 3:
        return say("Done.")
    if turns == 2:
        return call("Bash", {"command": "touch budget-marker", "description": "mark"})
    return call("Bash", {"command": ["ls", "pwd"][turns], "description": "look around"})


def test_a_budget_reached_mid_turn_holds_the_next_call_and_the_turn_is_counted_once(
        lw: Harness, fake_api: FakeAnthropic, claude_bin: str, tmp_path: Path) -> None:  # noqa: F811
    """Claude Code reports its dollars only when the turn ends: each call's usage, priced from the table as it
    comes, is what reaches the budget in a one-turn run; the turn's total_cost_usd then counts once."""
    cc = on_the_fake_api(lw, fake_api, claude_bin, tmp_path)
    fake_api.play(_one_turn, max_turns=20)
    sid = cc.run_detached("--model", MODEL, "--allowedTools=Bash", "look around", adapter="claude-code",
                          name="cc1", cwd=cc.work,  # type: ignore[attr-defined]
                          sets=("limits.max_cost_usd=0.000001",))
    gate = budget_gate(cc, sid, "g1", timeout=60)
    assert gate["reason"].startswith("the session's cost budget is reached: $")
    assert of_kind(cc, sid, "iteration") == [], "held before the turn ended"
    (held,) = of_kind(cc, sid, "tool_call")
    assert "ls" in str(held["args"]) and of_kind(cc, sid, "tool_result") == []
    assert [u["cost_source"] for u in of_kind(cc, sid, "usage")] == ["provisional"]
    proc = cc.cli("set", sid, "limits.max_cost_usd=100")
    assert proc.returncode == 0, proc.stderr
    snap = cc.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert (cc.work / "budget-marker").exists()  # type: ignore[attr-defined]
    usages = of_kind(cc, sid, "usage")
    assert [u["cost_source"] for u in usages] == ["provisional"] * 4 + ["agent"]
    tokens = [sum(u.get(k) or 0 for u in usages) for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                                             "cache_write_tokens")]
    reported = SHIPPED_TABLE.cost(MODEL, *tokens)  # Claude Code prices Sonnet 4.5 as the table does
    assert reported is not None and snap["cost"]["cost_usd"] == pytest.approx(reported, rel=0.01)
