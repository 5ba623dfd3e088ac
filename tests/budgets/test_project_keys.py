"""Which project a session's spend counts under: a `--worktree` session's is the user's checkout (not its worktree
under the daemon's data directory), live and rebuilt after a restart; and a budgets.projects changed live sorts
today's spend into the new projects at once. Real daemon, real store, real git, the spending agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.budgets.conftest import Start, budget_gate, spender
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.worktree.test_worktree import make_repo

COST = 0.10


def projects(lw: Harness) -> dict[str, dict[str, Any]]:
    return {p["project"]: p for p in lw.request("ping")["spending"]["projects"]}


def in_worktree(lw: Harness, cwd: Path, out: Path, *extra: str) -> str:
    """The spender, `loopwarden run --detach --worktree` from `cwd`; its session id."""
    proc = lw.cli("run", "--detach", "--worktree", "--adapter", "native", "--", PY, str(AGENTS / "spender.py"),
                  str(out), str(COST), *extra, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_worktree_sessions_spend_counts_under_its_checkouts_project_live_and_after_a_restart(
        daemon: Start, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    lw = daemon(budgets={"projects": [f"{repo}=0.35"]})
    first = in_worktree(lw, repo / "sub", tmp_path / "first", "--calls", "2")
    snap = lw.wait_state(first, "exited")
    assert snap["exit_code"] == 0 and snap["cwd"].startswith(str(lw.paths.data / "worktrees"))
    assert round(projects(lw)[str(repo)]["spent"], 4) == 0.2 and len(projects(lw)) == 1
    lw.stop()
    lw.start()
    assert round(projects(lw)[str(repo)]["spent"], 4) == 0.2 and len(projects(lw)) == 1
    second = in_worktree(lw, repo, tmp_path / "second", "--pace", "0.02")
    gate = budget_gate(lw, second)
    assert gate["evidence"]["budget"] == "project" and gate["evidence"]["project"] == str(repo)
    assert 0.35 <= projects(lw)[str(repo)]["spent"] <= 0.35 + COST + 1e-9


def test_budgets_projects_changed_live_sorts_todays_spend_into_the_new_projects(
        daemon: Start, tmp_path: Path) -> None:
    app = tmp_path / "app"
    (app / "sub").mkdir(parents=True)
    lw = daemon()
    done = spender(lw, tmp_path / "done", COST, "--calls", "3", cwd=app / "sub", name="done")
    assert lw.wait_state(done, "exited")["exit_code"] == 0
    assert set(projects(lw)) == {str(app / "sub")}
    proc = lw.cli("set", f"budgets.projects={app}=0.35")
    assert proc.returncode == 0, proc.stderr
    after = projects(lw)
    assert set(after) == {str(app)} and round(after[str(app)]["spent"], 4) == 0.3  # not $0 until a restart
    held = spender(lw, tmp_path / "held", COST, "--pace", "0.02", cwd=app, name="held")
    gate = budget_gate(lw, held)
    assert gate["evidence"]["project"] == str(app) and gate["evidence"]["used"] <= 0.35 + COST + 1e-9
