"""The real Codex CLI (`codex app-server`) on the fake Responses API: the tokens it reports reach the session's
token budget, and its next command's approval waits behind the budget gate until the budget is raised."""

from __future__ import annotations

import pytest

from tests.budgets.conftest import budget_gate
from tests.codex.fake_responses import FakeResponses, run, say
from tests.support.daemon import Harness
from tests.support.events import of_kind

from tests.codex.conftest import codex_bin, codex_home, cx, fake_model  # noqa: F401 - the real CLI's fixtures

pytestmark = pytest.mark.timeout(90)


def test_the_tokens_codex_reports_hold_its_next_command_until_the_budget_is_raised(
        cx: Harness, fake_model: FakeResponses) -> None:  # noqa: F811
    fake_model.play([run("touch marker-1"), run("touch marker-2"), run("touch marker-3"), say("Done.")])
    sid = cx.run_detached("make three markers", adapter="codex", name="cx", cwd=cx.work,  # type: ignore[attr-defined]
                          sets=("limits.max_tokens=1",))
    gate = budget_gate(cx, sid, timeout=60)
    assert "token budget is reached" in gate["reason"] and "(limits.max_tokens)" in gate["reason"]
    # one turn (one prompt, four model calls): thread/tokenUsage/updated came during it, before the turn's end
    assert of_kind(cx, sid, "iteration") == [] and of_kind(cx, sid, "usage")
    held = of_kind(cx, sid, "tool_call")[-1]
    assert held["call_id"] not in {r.get("call_id") for r in of_kind(cx, sid, "tool_result")}
    marker = next(m for m in ("marker-1", "marker-2", "marker-3") if m in str(held["args"]))
    assert not (cx.work / marker).exists()  # type: ignore[attr-defined]
    assert cx.cli("set", sid, "limits.max_tokens=0").returncode == 0  # off: released
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert all((cx.work / f"marker-{n}").exists() for n in (1, 2, 3))  # type: ignore[attr-defined]
