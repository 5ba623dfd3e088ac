"""What every session spends, per local day and per project, against the daemon's budgets (`budgets.*`).

The ledger is rebuilt from the store's usage events when the daemon starts (the last `DAYS_SHOWN` local days)
and kept up as usage events are judged (a session's `spend` record). A project is a session's working directory
(for a `--worktree` session, the user's checkout and the directory in it, not the worktree), or the
`budgets.projects` PATH that holds it; changing budgets.projects sorts today's spend into the new projects.
When the day's budget or a project's is reached, each live session
it covers is told (`Supervised.outside_budgets`): its engine holds the next call behind a budget gate. Raising a
budget (`loopwarden set budgets.day_usd=...`) or a new day tells them again, which releases what was held.

Budgets changed live are kept in `budgets.json` in the daemon's data directory (owner-only), and win over the
config file at the next start unless the file was changed after them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from typing import Any, Final

import anyio

from ..paths import Paths
from ..supervisor.config import (DAEMON_LIVE_KEYS, Budgets, Config, ConfigError, change_daemon, load_config,
                                 project_budgets, show_value, value_of)
from .contract import Supervised
from .registry import SessionRegistry
from .store import Store
from .worktrees import project_dir

DAYS_SHOWN: Final = 7  # days of spend `status` shows, today included
PROJECTS_SHOWN: Final = 20  # projects of today's spend shown, the most spent first
NO_PROJECT: Final = "(no working directory)"
OVERRIDES: Final = "budgets.json"
Reached = dict[str, dict[str, Any]]  # scope (day, project) -> {used, limit, project}


def local_day(ts: float) -> str:
    """The local calendar day of `ts`, as 2026-12-06."""
    return time.strftime("%Y-%m-%d", time.localtime(ts))


def day_start(ts: float, days_back: int = 0) -> float:
    """When the local day of `ts` (less `days_back` days) began."""
    day = date.fromisoformat(local_day(ts)) - timedelta(days=days_back)
    return datetime(day.year, day.month, day.day).timestamp()


class Spending:
    """The day's spend, the fleet's and each project's, and the last days'; the daemon's budgets over them."""

    def __init__(self, paths: Paths, registry: SessionRegistry, *, log: Callable[[str], None],
                 clock: Callable[[], float]) -> None:
        self.paths = paths
        self.registry = registry
        self.log = log
        self.clock = clock
        self.settings = Budgets()
        self._projects: list[tuple[str, float]] = []  # budgets.projects, parsed: (path, dollars)
        self.today = local_day(clock())
        self.by_day: dict[str, float] = {}  # local day -> dollars, the last DAYS_SHOWN days
        self.by_project: dict[str, float] = {}  # today's dollars per project
        self._by_dir: dict[str | None, float] = {}  # today's dollars per session directory, for a new projects map
        self.held: set[str] = set()  # the scopes reached now: "day", "project:PATH"
        self._view: dict[str, Any] | None = None  # what `view` said, until the spend or the budgets change

    # ---- settings ---------------------------------------------------------------------------
    def configure(self) -> None:
        """The budgets from the config file (and environment), then those set live since it last changed."""
        path = self.paths.config_file
        try:
            settings = load_config(file=path if path.exists() else None).budgets
        except ConfigError as exc:
            self.log(f"budgets: settings not read ({exc}); none apply")
            settings = Budgets()
        live = self._overrides()
        if live is not None:
            try:
                settings = change_daemon(Config(budgets=settings), live).budgets
            except ConfigError as exc:
                self.log(f"budgets: {self.paths.data / OVERRIDES} not taken ({exc})")
        self._take(settings)

    def _overrides(self) -> dict[str, Any] | None:
        """The budgets set live, unless the config file changed after them."""
        try:
            data = json.loads((self.paths.data / OVERRIDES).read_text())
            config_at = self.paths.config_file.stat().st_mtime if self.paths.config_file.exists() else 0.0
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("values"), dict):
            return None
        if float(data.get("set_at") or 0) < config_at:
            return None
        return {k: v for k, v in data["values"].items() if k in DAEMON_LIVE_KEYS}

    def _take(self, settings: Budgets) -> None:
        self.settings, self._view = settings, None
        before = self._projects
        self._projects = sorted(project_budgets("budgets.projects", settings.projects), key=lambda p: -len(p[0]))
        if [p for p, _ in before] != [p for p, _ in self._projects]:  # today's spend, into the new projects
            self.by_project = {}
            for where, usd in self._by_dir.items():
                project = self.project_of(where)
                self.by_project[project] = self.by_project.get(project, 0.0) + usd

    def change(self, values: Mapping[str, Any]) -> dict[str, list[Any]]:
        """`loopwarden set KEY=VALUE` of the daemon's budgets (ConfigError for a key that is not one): taken at
        once, kept for the next daemon, and every live session told. KEY -> [old, new] of those that moved."""
        before = Config(budgets=self.settings)
        after = change_daemon(before, values)
        moved = {k: [value_of(before, k), value_of(after, k)] for k in values
                 if value_of(before, k) != value_of(after, k)}
        self._take(after.budgets)
        self._keep({k: value_of(after, k) for k in DAEMON_LIVE_KEYS})
        self.tell_all()
        return moved

    def _keep(self, values: dict[str, Any]) -> None:
        path = self.paths.data / OVERRIDES
        tmp = path.with_suffix(".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump({"set_at": self.clock(), "values": values}, out)
            os.replace(tmp, path)
        except OSError as exc:
            self.log(f"budgets: the live change could not be kept for the next daemon ({exc})")

    # ---- the ledger -------------------------------------------------------------------------
    def rebuild(self, store: Store | None) -> None:
        """The last days' spend from the stored usage events (at the daemon's start)."""
        now = self.clock()
        self.today = local_day(now)
        self.by_day, self.by_project, self._by_dir, self._view = {}, {}, {}, None
        if store is None:
            return
        try:
            rows = store.spend_since(day_start(now, DAYS_SHOWN - 1))
        except Exception as exc:  # noqa: BLE001 - the store's trouble: counted from now on instead
            self.log(f"budgets: the spend so far could not be read ({exc}); counting from now")
            return
        for ts, cwd, usd in rows:
            self._add(ts, cwd, usd)
        self.held = self._reached()

    def project_of(self, cwd: str | None) -> str:
        """A working directory's project: the longest budgets.projects PATH holding it, else itself."""
        if not cwd:
            return NO_PROJECT
        cwd = os.path.normpath(cwd)
        for path, _ in self._projects:
            if cwd == path or cwd.startswith(path.rstrip("/") + "/"):
                return path
        return cwd

    def project_limit(self, project: str) -> float:
        for path, usd in self._projects:
            if path == project:
                return usd
        return self.settings.project_usd

    def _add(self, ts: float, where: str | None, usd: float) -> None:
        self._view = None
        day = local_day(ts)
        self.by_day[day] = self.by_day.get(day, 0.0) + usd
        if day == self.today:
            project = self.project_of(where)
            self.by_project[project] = self.by_project.get(project, 0.0) + usd
            self._by_dir[where] = self._by_dir.get(where, 0.0) + usd

    def spent(self, session_id: str, data: dict[str, Any]) -> None:
        """A usage event that cost something was judged (`data`: its dollars and time)."""
        usd, ts = data.get("usd"), data.get("ts")
        if not isinstance(usd, (int, float)) or usd <= 0 or not isinstance(ts, (int, float)):
            return
        if local_day(ts) > self.today:
            self.new_day(ts)
        session = self.registry.sessions.get(session_id)
        self._add(ts, where_of(session) if session is not None else None, float(usd))
        if self._reached() != self.held:
            self.tell_all()

    def new_day(self, now: float) -> None:
        """A new local day: today's spend starts at nothing (the last days kept); what was held is told again."""
        self.today, self._view = local_day(now), None
        oldest = local_day(day_start(now, DAYS_SHOWN - 1))
        self.by_day = {d: v for d, v in self.by_day.items() if d >= oldest}
        self.by_project, self._by_dir = {}, {}
        self.tell_all()

    def _reached(self) -> set[str]:
        """The scopes reached now: "day", and "project:PATH" for each project at or over its budget."""
        out = set()
        day_usd = self.settings.day_usd
        if day_usd and self.by_day.get(self.today, 0.0) >= day_usd:
            out.add("day")
        for project, usd in self.by_project.items():
            limit = self.project_limit(project)
            if limit and usd >= limit:
                out.add("project:" + project)
        return out

    def reached_for(self, cwd: str | None) -> Reached:
        """The daemon's budgets reached now that a session working in `cwd` (`where_of`) counts against."""
        out: Reached = {}
        day_usd = self.settings.day_usd
        spent = self.by_day.get(self.today, 0.0)
        if day_usd and spent >= day_usd:
            out["day"] = {"used": round(spent, 6), "limit": day_usd}
        project = self.project_of(cwd)
        limit = self.project_limit(project)
        used = self.by_project.get(project, 0.0)
        if limit and used >= limit:
            out["project"] = {"used": round(used, 6), "limit": limit, "project": project}
        return out

    # ---- telling the sessions -------------------------------------------------------------------
    def tell(self, session: Supervised) -> None:
        """Tell a live session which of the daemon's budgets it counts against are reached, when that changed
        (which budgets, or their limits) since its engine last heard."""
        if session.final:
            return
        reached = self.reached_for(where_of(session))
        known = session.health.budget.outside
        if {s: f["limit"] for s, f in reached.items()} == {s: f.get("limit") for s, f in known.items()}:
            return
        session.outside_budgets(reached)

    def tell_all(self) -> None:
        self.held, self._view = self._reached(), None
        for session in list(self.registry.sessions.values()):
            self.tell(session)

    async def days_turn(self) -> None:
        """At each local midnight, a new day (checked every minute: the clock may be set meanwhile)."""
        while True:
            await anyio.sleep(60.0)
            now = self.clock()
            if local_day(now) != self.today:
                self.new_day(now)

    # ---- what `status`, `ls` and the console show ---------------------------------------------
    def view(self) -> dict[str, Any]:
        """Today's spend, per project (the most first), the budgets, and the last days' (built again only once the
        spend or the budgets changed: the daemon's health asks for it every flush)."""
        if self._view is not None:
            return self._view
        now = self.clock()
        days = [local_day(day_start(now, n)) for n in range(DAYS_SHOWN)]
        projects = sorted(self.by_project.items(), key=lambda p: -p[1])[:PROJECTS_SHOWN]
        self._view = {
            "today": self.today, "spent_today": round(self.by_day.get(self.today, 0.0), 4),
            "day_usd": self.settings.day_usd, "project_usd": self.settings.project_usd,
            "budgets": {k: show_value(k, value_of(Config(budgets=self.settings), k)) for k in sorted(DAEMON_LIVE_KEYS)},
            "projects": [{"project": p, "spent": round(v, 4), "limit": self.project_limit(p),
                          "reached": f"project:{p}" in self.held} for p, v in projects],
            "days": [{"day": d, "spent": round(self.by_day.get(d, 0.0), 4)} for d in days],
            "reached": sorted(self.held)}
        return self._view


def where_of(session: Supervised) -> str | None:
    """Where a session works for the budgets: a worktree session's checkout (and directory in it), else its cwd."""
    tree = session.spec.worktree or {}
    return project_dir(session.spec.cwd, tree.get("checkout"), tree.get("subdir"))
