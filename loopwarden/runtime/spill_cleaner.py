"""Removing spill files past their retention, in every spill directory in use, each session's own way.

A session may have its own `spill.dir` and `spill.retention`; its files are named after it
(`s3-0000012-bash.txt`), so each file is kept as long as the session that wrote it asked.
Files of sessions nobody remembers follow the daemon's retention.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .spill import Spiller, is_spill_name, slug

_SESSION = re.compile(r"(.+?)-[0-9]{7,}-")
MIN_INTERVAL = 1.0
MAX_INTERVAL = 3600.0


@dataclass(frozen=True)
class SessionSpill:
    """Where one session spilled and how long its files are kept."""

    session: str
    directory: str
    retention: float


@dataclass
class DirectoryPlan:
    """One spill directory: the retention of each session's files, and of the rest."""

    default: float
    sessions: dict[str, float] = field(default_factory=dict)  # session slug -> retention

    def retention_of(self, name: str) -> float:
        match = _SESSION.match(name)
        return self.sessions.get(match.group(1), self.default) if match else self.default


def plan(default_dir: str, default_retention: float, sessions: Iterable[SessionSpill]) -> dict[str, DirectoryPlan]:
    """Every directory in use, with its retentions."""
    plans = {default_dir: DirectoryPlan(default_retention)}
    for s in sessions:
        directory = plans.setdefault(s.directory, DirectoryPlan(default_retention))
        directory.sessions[slug(s.session, "session")] = s.retention
    return plans


def clean(plans: dict[str, DirectoryPlan], now: float) -> tuple[int, int]:
    """Remove every spill file older than its retention; how many were removed, and their bytes."""
    removed = freed = 0
    for directory, p in plans.items():
        for retention in {p.default, *p.sessions.values()}:
            def only(name: str, r: float = retention, p: DirectoryPlan = p) -> bool:
                return p.retention_of(name) == r

            spiller = Spiller(directory, retention=retention)
            removed += spiller.cleanup(now, only=only)
            freed += spiller.freed
    return removed, freed


def next_expiry(plans: dict[str, DirectoryPlan]) -> float | None:
    """When the next spill file left in these directories reaches its retention (wall clock), or None."""
    soonest: float | None = None
    for directory, p in plans.items():
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if not is_spill_name(entry.name):
                        continue
                    try:
                        expiry = entry.stat(follow_symlinks=False).st_mtime + p.retention_of(entry.name)
                    except OSError:
                        continue
                    soonest = expiry if soonest is None else min(soonest, expiry)
        except OSError:
            continue
    return soonest


def interval(plans: dict[str, DirectoryPlan], live: Iterable[float], now: float) -> float:
    """How long to sleep until the next cleaning (1 s to 1 h): until the next file left expires, and at
    most a quarter of the shortest retention of a live session, whose new files expire that soon."""
    wait = MAX_INTERVAL
    expiry = next_expiry(plans)
    if expiry is not None:
        wait = min(wait, expiry - now)
    for retention in live:
        wait = min(wait, retention / 4)
    return min(MAX_INTERVAL, max(MIN_INTERVAL, wait))
