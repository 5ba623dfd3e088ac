"""The line under the sessions table: counts, the view's filter/sort/group, spending, and what is wrong."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from textual.content import Content

from ..supervisor.verdicts import FINAL_STATES
from .feed import Feed
from .hosts_feed import HostsFeed
from .session_table import SessionTable, needs_human
from .spending import spend_text

RECONNECTED_SECONDS = 10.0  # how long the status line says "reconnected"


def status_line(snapshots: Mapping[str, dict[str, Any]], table: SessionTable, feed: Feed | HostsFeed,
                read_only: bool) -> Content:
    """Built as Content, since filter text and daemon errors are never markup."""
    if feed.error:
        return Content.styled(feed.error, "bold red")
    snaps = snapshots.values()
    live = sum(1 for s in snaps if s.get("state") not in FINAL_STATES)
    human = sum(1 for s in snaps if needs_human(s))
    count = len(snapshots)
    parts = [Content(f"{count} session{'' if count == 1 else 's'}, {live} live"),
             Content.styled(f"{human} waiting for a human (g)", "bold magenta") if human
             else Content("none waiting for a human")]
    if table.filter_text:
        parts.append(Content(f"filter: {table.filter_text!r}, {table.row_count} shown (esc clears)"))
    if table.hide_ended:
        parts.append(Content.styled(f"{count - live} ended hidden (h shows)", "yellow"))
    if table.selection:
        parts.insert(0, Content.styled(f"{len(table.selection)} marked (space, esc unmarks)", "bold reverse"))
    parts.append(Content(f"sort: {table.sort_text} (s, S)"))
    if table.group_by:
        parts.append(Content(f"group: {table.group_by} (G)"))
    spend = spend_text(feed.daemon)
    if spend is not None:
        parts.append(Content.styled(spend[0], "bold magenta") if spend[1] else Content(spend[0]))
    if read_only:
        parts.append(Content.styled("read-only", "yellow"))
    for host in getattr(feed, "host_trouble", ()):  # several hosts: those not connected now
        parts.append(Content.styled(host, "bold red"))
    trouble = daemon_trouble(feed.daemon)
    if trouble:
        parts.append(Content.styled(trouble, "bold red"))
    back = feed.reconnected_at
    if back is not None and time.monotonic() - back < RECONNECTED_SECONDS:
        parts.insert(0, Content.styled("reconnected", "bold green"))
    return Content("  ·  ").join(parts)


def daemon_trouble(health: dict[str, Any]) -> str | None:
    """What the daemon could not write or keep, in a few words for the status line (None on a good day)."""
    store = health.get("store") or {}
    if store and not store.get("open"):
        return "store NOT OPEN: nothing is kept (loopwarden status)"
    lost = sum((store.get("unwritten") or {}).values()) + int(health.get("dropped_events") or 0)
    if lost:
        return f"{lost:,} records not stored (loopwarden status)"
    return None
