"""Claude Code attached by its hooks under the day's budget: its PreToolUse waits behind the budget gate and the
budget raised lets it through; the real hook command against a real daemon."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.budgets.conftest import Start, budget_gate, spender
from tests.claude_code_hook.helpers import denial, event, hooked, pre, run_hook
from tests.support.waiting import wait_for


def test_a_hooked_call_waits_for_a_reached_day_budget_until_it_is_raised(daemon: Start, tmp_path: Path) -> None:
    lw = daemon(budgets={"day_usd": 0.3})
    native = spender(lw, tmp_path / "calls", 0.2, name="native")
    budget_gate(lw, native)  # $0.40 of $0.30 spent today: every session's next call waits
    run_hook(lw.env, event("UserPromptSubmit", prompt="go", cwd=str(tmp_path)))
    [snap] = hooked(lw)
    held: list = []
    thread = threading.Thread(target=lambda: held.append(run_hook(lw.env, pre(cwd=str(tmp_path)))))
    thread.start()
    gate = budget_gate(lw, snap["id"])
    assert gate["evidence"]["budget"] == "day" and gate["evidence"]["tool"] == "Bash"
    assert thread.is_alive()  # held, not answered
    assert lw.cli("set", "budgets.day_usd=5").returncode == 0
    thread.join(30)
    assert denial(held[0]) is None  # let through
    wait_for(lambda: lw.status(snap["id"])["state"] == "running", what="the hooked session running again")
    lw.request("kill", session=native)
