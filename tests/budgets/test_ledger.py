"""The spend ledger (runtime/spending.py) on a real SQLite store and real engines, with a clock moved by hand:
rebuilt from stored usage events, projects by working directory, a new day, and the budgets kept across a start."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwarden.paths import Paths
from loopwarden.runtime.spending import Spending, day_start, local_day
from loopwarden.runtime.store import Batch, Store
from loopwarden.supervisor.config import Config
from loopwarden.supervisor.health import SessionHealth
from tests.support.clock import Clock

NOON = day_start(1_800_000_000.0) + 12 * 3600  # midday, local time: a day's spend does not cross midnight


@dataclass
class Spec:
    id: str
    cwd: str | None
    worktree: dict[str, str] | None = None


@dataclass
class Engine:
    """A session as the ledger sees it: its spec and its real engine (what `outside_budgets` tells)."""

    spec: Spec
    health: SessionHealth = field(default_factory=lambda: SessionHealth(Config()))
    final: bool = False

    def outside_budgets(self, reached: dict[str, dict[str, Any]]) -> None:
        self.health.outside_budgets(reached, 0.0)


@dataclass
class Registry:
    sessions: dict[str, Any] = field(default_factory=dict)


def ledger(tmp_path: Path, clock: Clock, *sessions: Engine, config: str = "") -> Spending:
    paths = Paths(runtime=tmp_path / "run", data=tmp_path / "data", cache=tmp_path / "cache")
    paths.data.mkdir(exist_ok=True)
    if config:
        paths.config_file.write_text(config)
    spending = Spending(paths, Registry({s.spec.id: s for s in sessions}), log=lambda text: None,  # type: ignore[arg-type]
                        clock=clock)
    spending.configure()
    return spending


def usage_rows(store: Store, rows: list[tuple[str, str, float, float]]) -> None:
    """Sessions (id, cwd) and their usage events (ts, dollars), written as the daemon writes them."""
    sessions = {sid: cwd for sid, cwd, _, _ in rows}
    store.write(Batch(sessions_upsert=[{"id": sid, "name": sid, "cwd": cwd, "state": "exited"}
                                       for sid, cwd in sessions.items()],
                      events=[{"session_id": sid, "seq": n, "ts": ts, "kind": "usage",
                               "data": {"type": "usage", "input_tokens": 1, "output_tokens": 1, "cost_usd": usd}}
                              for n, (sid, _, ts, usd) in enumerate(rows, 1)]
                      + [{"session_id": "s1", "seq": 99, "ts": NOON, "kind": "tool_call",
                          "data": {"type": "tool_call", "tool": "x", "args": {}}}]))


def test_the_spend_is_rebuilt_from_the_stored_usage_of_the_last_seven_days(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store.db")
    usage_rows(store, [("s1", "/w/app", NOON, 1.25), ("s2", "/w/app/", NOON + 60, 0.5), ("s3", "/w/lib", NOON, 2.0),
                       ("s1", "/w/app", NOON - 86400, 4.0), ("s1", "/w/app", NOON - 8 * 86400, 100.0)])
    spending = ledger(tmp_path, Clock(NOON + 3600))
    spending.rebuild(store)
    view = spending.view()
    assert view["spent_today"] == 3.75 and view["today"] == local_day(NOON)
    assert [p["project"] for p in view["projects"]] == ["/w/lib", "/w/app"]
    assert [p["spent"] for p in view["projects"]] == [2.0, 1.75]
    assert [d["spent"] for d in view["days"]][:2] == [3.75, 4.0] and len(view["days"]) == 7
    assert sum(d["spent"] for d in view["days"]) == 7.75  # the one eight days ago is not shown
    store.close()


def test_a_project_is_its_directory_or_the_budgets_projects_path_holding_it(tmp_path: Path) -> None:
    spending = ledger(tmp_path, Clock(NOON), config='[budgets]\nproject_usd = 1\nprojects = ["/w/app=3"]\n')
    assert spending.project_of("/w/app/sub/../sub") == "/w/app" and spending.project_of("/w/application") == \
        "/w/application"
    assert spending.project_limit("/w/app") == 3.0 and spending.project_limit("/w/other") == 1.0
    assert spending.project_of(None) == "(no working directory)"


def test_reaching_a_budget_tells_the_sessions_it_covers_and_a_new_day_releases_them(tmp_path: Path) -> None:
    clock = Clock(NOON)
    app, lib = Engine(Spec("s1", "/w/app")), Engine(Spec("s2", "/w/lib"))
    spending = ledger(tmp_path, clock, app, lib, config="[budgets]\nday_usd = 5\nproject_usd = 2\n")
    spending.spent("s1", {"usd": 2.5, "ts": clock()})
    assert app.health.budget.outside == {"project": {"used": 2.5, "limit": 2.0, "project": "/w/app"}}
    assert lib.health.budget.outside == {}
    spending.spent("s2", {"usd": 2.5, "ts": clock()})
    assert set(app.health.budget.outside) == {"day", "project"} and set(lib.health.budget.outside) == {"day",
                                                                                                      "project"}
    assert spending.view()["reached"] == ["day", "project:/w/app", "project:/w/lib"]
    clock.now = day_start(NOON) + 86400 + 60  # just past midnight
    spending.spent("s1", {"usd": 0.1, "ts": clock()})  # the first spend of the new day
    assert app.health.budget.outside == {} and lib.health.budget.outside == {}
    assert spending.view()["spent_today"] == 0.1 and spending.view()["days"][1]["spent"] == 5.0


def test_budgets_set_live_are_kept_unless_the_config_file_changed_since(tmp_path: Path) -> None:
    clock = Clock(time.time() + 5)  # the change comes after the file was written
    spending = ledger(tmp_path, clock, config="[budgets]\nday_usd = 5\n")
    assert spending.change({"budgets.day_usd": "9"}) == {"budgets.day_usd": [5.0, 9.0]}
    kept = tmp_path / "data" / "budgets.json"
    assert kept.stat().st_mode & 0o777 == 0o600
    assert ledger(tmp_path, clock).settings.day_usd == 9.0  # a restart takes it over the file's 5
    later = clock() + 60  # ... and the file is changed after the change
    config = tmp_path / "data" / "config.toml"
    config.write_text("[budgets]\nday_usd = 7\n")
    os.utime(config, (later, later))
    assert ledger(tmp_path, clock).settings.day_usd == 7.0  # the file changed after: the file wins
