"""The daemon's budgets: a day's spend across every session, a project's, rebuilt from the store after a restart,
and changed live with `loopwarden set` (no session); real daemon, real store, real looping agents."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.budgets.conftest import Start, budget_gate, calls, spender, spent
from tests.support.daemon import Harness
from tests.support.waiting import wait_for

COST = 0.10


def spending(lw: Harness) -> dict[str, Any]:
    return dict(lw.request("ping")["spending"])


def test_the_day_budget_holds_every_session_and_raising_it_lets_them_go_on(daemon: Start, tmp_path: Path) -> None:
    lw = daemon(budgets={"day_usd": 1.0})
    a = spender(lw, tmp_path / "a", COST, "--pace", "0.02", name="a")
    b = spender(lw, tmp_path / "b", COST, "--pace", "0.02", name="b")
    gates = [budget_gate(lw, a), budget_gate(lw, b)]
    assert all(g["evidence"]["budget"] == "day" for g in gates)
    assert gates[0]["reason"].startswith("the day budget of every session is reached: $")
    total = spent(lw, a) + spent(lw, b)
    assert 1.0 <= total <= 1.0 + 2 * COST + 1e-9  # at most one call each past it
    view = spending(lw)
    assert abs(view["spent_today"] - total) < 1e-6 and view["day_usd"] == 1.0 and view["reached"] == ["day"]
    assert view["days"][0] == {"day": time.strftime("%Y-%m-%d"), "spent": view["spent_today"]}
    assert len(view["days"]) == 7

    listed = lw.cli("ls")
    assert f"total today: ${total:.2f} of $1.00 (budgets.day_usd): REACHED" in listed.stdout
    shown = lw.cli("status")
    assert f"spent today: ${total:.2f} of $1.00 (budgets.day_usd): REACHED" in shown.stdout

    proc = lw.cli("set", "budgets.day_usd=2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "daemon: budgets.day_usd 1.0 -> 2.0\n"
    budget_gate(lw, a, "g2")  # both went on, to the new budget
    budget_gate(lw, b, "g2")
    total = spent(lw, a) + spent(lw, b)
    assert 2.0 <= total <= 2.0 + 2 * COST + 1e-9
    rows = [r for r in lw.request("actions") if r["action"] == "set" and not r["session_id"]]
    assert [(r["target"], r["note"]) for r in rows] == [("budgets.day_usd", "budgets.day_usd: 1.0 -> 2.0")]


def test_a_project_budget_holds_only_that_projects_sessions(daemon: Start, tmp_path: Path) -> None:
    app, other = tmp_path / "app", tmp_path / "other"
    (app / "sub").mkdir(parents=True)
    other.mkdir()
    lw = daemon(budgets={"project_usd": 0.3, "projects": [f"{other}=100"]})
    held = spender(lw, tmp_path / "held", COST, "--pace", "0.02", cwd=app / "sub", name="held")
    also = spender(lw, tmp_path / "also", COST, cwd=app / "sub", name="also")  # the same project
    free = spender(lw, tmp_path / "free", COST, "--calls", "8", cwd=other, name="free")
    gate = budget_gate(lw, held)
    assert gate["evidence"]["budget"] == "project" and gate["evidence"]["project"] == str(app / "sub")
    budget_gate(lw, also)
    assert lw.wait_state(free, "exited")["exit_code"] == 0  # its project's own budget, $100, is far
    assert calls(tmp_path / "free") == [(n, "allow") for n in range(1, 9)]
    view = spending(lw)
    projects = {p["project"]: p for p in view["projects"]}
    assert projects[str(other)]["limit"] == 100.0 and not projects[str(other)]["reached"]
    assert projects[str(app / "sub")]["reached"] and projects[str(app / "sub")]["limit"] == 0.3


def test_the_days_spend_is_rebuilt_after_a_restart_and_a_live_budget_kept(daemon: Start, tmp_path: Path) -> None:
    lw = daemon()
    first = spender(lw, tmp_path / "first", COST, "--calls", "6")
    assert lw.wait_state(first, "exited")["exit_code"] == 0
    assert round(spending(lw)["spent_today"], 4) == 0.6
    assert lw.cli("set", "budgets.day_usd=0.5").returncode == 0
    lw.stop()
    lw.start()
    view = spending(lw)
    assert round(view["spent_today"], 4) == 0.6 and view["day_usd"] == 0.5 and view["reached"] == ["day"]
    kept = json.loads((lw.paths.data / "budgets.json").read_text())
    assert kept["values"]["budgets.day_usd"] == 0.5
    assert oct((lw.paths.data / "budgets.json").stat().st_mode & 0o777) == "0o600"
    late = spender(lw, tmp_path / "late", COST, name="late")
    gate = budget_gate(lw, late)  # its very first call waits: the day's budget was spent before the restart
    assert gate["evidence"]["budget"] == "day" and calls(tmp_path / "late") == []
    assert lw.cli("set", "budgets.day_usd=0").returncode == 0  # off: released
    wait_for(lambda: len(calls(tmp_path / "late")) >= 2, what="the late session to go on")


def test_usage_priced_from_the_table_counts_toward_the_day_live_and_after_a_restart(daemon: Start,
                                                                                   tmp_path: Path) -> None:
    lw = daemon()
    priced = spender(lw, tmp_path / "priced", 0.0, "--calls", "4", "--model", "claude-sonnet-4-5")
    assert lw.wait_state(priced, "exited")["exit_code"] == 0
    per_call = (1000 * 3.0 + 100 * 15.0) / 1e6  # the shipped Sonnet 4.5 row: $3 in, $15 out per million
    assert round(spending(lw)["spent_today"], 6) == round(4 * per_call, 6)
    lw.stop()
    lw.start()
    assert round(spending(lw)["spent_today"], 6) == round(4 * per_call, 6)  # the stored usage carried the dollars


def test_set_without_a_session_takes_only_the_daemons_keys(daemon: Start) -> None:
    lw = daemon()
    cases = {
        ("limits.max_cost_usd=5",): "set: limits.max_cost_usd is a session's: name the session, e.g. loopwarden set "
                                    "SESSION limits.max_cost_usd=VALUE",
        ("budgets.day_usd=lots",): "budgets.day_usd: 'lots' is not valid; it accepts a number >= 0",
        ("budgets.projects=app=5",): "budgets.projects: 'app=5' is not PATH=USD with an absolute PATH, e.g. "
                                     "/home/me/app=5",
        ("budgets.day_us=5",): "set: unknown key 'budgets.day_us' (did you mean budgets.day_usd?)",
        ("s1", "budgets.day_usd=5"): "no session 's1' (see 'loopwarden ls')",
    }
    for args, message in cases.items():
        proc = lw.cli("set", *args)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == f"loopwarden: error: {message}\n"
    sid = lw.run_detached("sleep", "60", adapter="plain")
    proc = lw.cli("set", sid, "budgets.day_usd=5")
    assert proc.stderr == ("loopwarden: error: set: budgets.day_usd is the daemon's, for every session: give it "
                           "without a session, e.g. loopwarden set budgets.day_usd=VALUE\n")
    assert spending(lw)["day_usd"] == 0.0
