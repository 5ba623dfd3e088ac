"""The daemon's spend for the console's status line: today's against the day's budget."""

from __future__ import annotations

from typing import Any


def spend_text(health: dict[str, Any]) -> tuple[str, bool] | None:
    """('spent today $1.20 of $5.00', reached) from the daemon's health record; None before it says."""
    spending = health.get("spending")
    if not isinstance(spending, dict):
        return None
    spent, limit = float(spending.get("spent_today") or 0), float(spending.get("day_usd") or 0)
    if not (spent or limit or spending.get("reached")):
        return None  # nothing spent, no budget: nothing to say
    text = f"spent today ${spent:,.2f}" + (f" of ${limit:,.2f}" if limit else "")
    reached = list(spending.get("reached") or [])
    if reached:
        projects = sum(1 for r in reached if str(r).startswith("project:"))
        text += ": day budget REACHED" if "day" in reached else f": {projects} project budget(s) REACHED"
    return text, bool(reached)
