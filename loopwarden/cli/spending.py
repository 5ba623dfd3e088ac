"""The daemon's spend in words: today's against the budgets, per project, the last days (`status`, `ls`)."""

from __future__ import annotations

from typing import Any


def usd(value: Any) -> str:
    return f"${float(value or 0):,.2f}"


def _of(spent: Any, limit: Any, key: str) -> str:
    return f"{usd(spent)} of {usd(limit)} ({key})" if limit else f"{usd(spent)} (no {key})"


def total_line(spending: dict[str, Any] | None) -> str | None:
    """One line under `ls`: what every session spent today, against the day's budget."""
    if not spending or not (spending.get("spent_today") or spending.get("day_usd") or spending.get("reached")):
        return None  # nothing spent, no budget: nothing to say
    line = f"total today: {_of(spending.get('spent_today'), spending.get('day_usd'), 'budgets.day_usd')}"
    if "day" in (spending.get("reached") or []):
        line += ": REACHED, every session's next call waits ('loopwarden set budgets.day_usd=...' raises it)"
    return line


def spending_lines(spending: dict[str, Any] | None) -> list[str]:
    """`status` without a session: today's spend, per project, and by day."""
    total = total_line(spending)
    if total is None or spending is None:
        return []
    lines = [total.replace("total today", "spent today", 1)]
    for p in spending.get("projects") or []:
        held = "  REACHED: its sessions' next calls wait" if p.get("reached") else ""
        lines.append(f"  {p.get('project')}: {_of(p.get('spent'), p.get('limit'), 'budgets.project_usd')}{held}")
    days = spending.get("days") or []
    if days:
        lines.append("last days: " + ", ".join(f"{str(d.get('day'))[5:]} {usd(d.get('spent'))}" for d in days))
    return lines
