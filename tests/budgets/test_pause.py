"""A session's budget reached mid-run: its next call waits behind a budget gate, an alert goes out, and raising the
budget continues the run; real daemon, real store, a real looping agent, alerts to a webhook on loopback."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.budgets.conftest import Start, budget_gate, calls, spender, spent, stored_gate
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.support.waiting import wait_for

def _after_loopwarden(line: str) -> list[str]:
    words = shlex.split(line.removeprefix("decide: "))
    return words[words.index("loopwarden") + 1:]


COST = 0.12  # a call; $0.50 is reached at the fifth call's usage ($0.60): the sixth waits


def test_a_budget_reached_holds_the_next_call_alerts_and_raising_it_continues(
        daemon: Start, webhook: WebhookReceiver, tmp_path: Path) -> None:
    lw = daemon(notify={"urls": [webhook.url()]})
    out = tmp_path / "calls"
    sid = spender(lw, out, COST, sets=("limits.max_cost_usd=0.50",))
    gate = budget_gate(lw, sid)
    assert gate["rule"] == "budget" and gate["seq"] > 0
    assert gate["reason"] == ("the session's cost budget is reached: $0.60 used of $0.50 (limits.max_cost_usd); "
                              "the next call waits until it is raised, or one call is approved")
    assert calls(out) == [(n, "allow") for n in range(1, 6)]  # the sixth call asked, and has no verdict
    events = lw.events(sid)
    assert [e["data"]["args"] for e in events if e["kind"] == "tool_call"][-1] == {"i": 6}
    snap = lw.status(sid)
    assert snap["state"] == "gated" and snap["pending_gates"] == ["g1"]
    assert spent(lw, sid) <= 0.50 + COST  # within one call of the budget

    got = webhook.wait_for(lambda r: f"{sid}:g1" in r.message)[0]
    assert got.title.endswith("a budget is reached: the session waits")
    decide = [_after_loopwarden(line) for line in got.message.splitlines() if line.startswith("decide: ")]
    assert decide[:2] == [["set", sid, "limits.max_cost_usd=..."], ["approve", f"{sid}:g1"]]

    proc = lw.cli(*decide[0][:-1], "limits.max_cost_usd=1.00")  # the alert's own command
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{sid}: limits.max_cost_usd 0.5 -> 1.0\n"
    second = budget_gate(lw, sid, "g2")  # the run went on where it stopped, up to the new budget
    assert calls(out) == [(n, "allow") for n in range(1, 10)]  # $1.08 at the ninth: the tenth waits
    assert "$1.08 used of $1.00" in second["reason"]
    assert spent(lw, sid) <= 1.00 + COST
    assert stored_gate(lw, sid, "g1") == ("approved", "budget")
    lw.cli("kill", sid, "--yes")


def test_an_approved_budget_gate_lets_one_call_through_and_a_denied_one_ends_the_session(
        daemon: Start, tmp_path: Path) -> None:
    lw = daemon()
    out = tmp_path / "calls"
    sid = spender(lw, out, COST, sets=("limits.max_cost_usd=0.50",))
    budget_gate(lw, sid)
    assert lw.cli("approve", f"{sid}:g1").returncode == 0
    budget_gate(lw, sid, "g2")
    assert calls(out) == [(n, "allow") for n in range(1, 7)]  # one more call, then held again
    proc = lw.cli("deny", f"{sid}:g2", "--note", "over budget")
    assert proc.returncode == 0, proc.stderr
    snap = lw.wait_state(sid, "terminated")
    assert snap["termination"] == "budget"
    assert spent(lw, sid) == round(6 * COST, 4)


def test_budget_action_terminate_still_ends_the_session_at_its_budget(daemon: Start, tmp_path: Path) -> None:
    lw = daemon()
    out = tmp_path / "calls"
    sid = spender(lw, out, COST, sets=("limits.max_cost_usd=0.50", "limits.budget_action=terminate"))
    snap = lw.wait_state(sid, "terminated")
    assert snap["termination"] == "budget" and not snap.get("pending_gates")
    assert "cost budget exhausted ($0.60 of $0.50)" in snap["termination_text"]
    wait_for(lambda: len(calls(out)) == 5, what="the five calls written down")
