"""The sessions table: one row per session, updated by row key and changed cells only."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from ..supervisor.config import format_duration
from ..supervisor.verdicts import FINAL_STATES

COLUMNS = (("id", "ID"), ("name", "NAME"), ("state", "STATE"), ("runtime", "RUNTIME"), ("calls", "CALLS"),
           ("repetition", "REPEAT"), ("validation", "VALID"), ("loop", "LOOP"), ("gates", "GATES"),
           ("reason", "ENDED"), ("usage", "TOKENS/$"), ("cpu", "CPU"), ("mem", "MEM"), ("adapter", "ADAPTER"))
# most telling first: at 80 columns the table shows up to the gates, the rest scrolls into view

STATE_STYLE = {"running": "green", "gated": "bold magenta", "paused": "yellow", "stopping": "yellow",
               "exited": "dim", "terminated": "red", "lost": "red", "starting": "cyan"}


def session_number(sid: str) -> int:
    return int(sid[1:]) if sid[1:].isdigit() else 0


def runtime_of(snap: dict[str, Any], now: float) -> float:
    """Seconds the session has run; a live but quiet session publishes nothing, so count on from its start."""
    elapsed = float(snap.get("runtime") or 0)
    if snap.get("state") not in FINAL_STATES and snap.get("started_at"):
        elapsed = max(elapsed, now - snap["started_at"])
    return elapsed


def needs_human(snap: dict[str, Any]) -> bool:
    return bool(snap.get("pending_gates")) and snap.get("state") not in FINAL_STATES


def counter_text(snap: dict[str, Any], name: str) -> Text:
    """`value/limit`, yellow from 60 % of the limit, red at it."""
    value, limit = (snap.get("counters") or {}).get(name, [0, 0])
    text = f"{value:g}/{limit:g}" if limit else f"{value:g}"
    ratio = value / limit if limit else 0
    return Text(text, style="bold red" if ratio >= 1 else "yellow" if ratio >= 0.6 else "")


def usage_text(snap: dict[str, Any]) -> str:
    """Cost when the agent reports it, else tokens, from the budget counters."""
    counters = snap.get("counters") or {}
    cost = (counters.get("cost_usd") or [0])[0]
    tokens = (counters.get("tokens") or [0])[0]
    if cost:
        return f"${cost:.2f}"
    if tokens:
        return f"{tokens / 1000:.1f}k" if tokens >= 1000 else f"{tokens:g}"
    return "-"


def row_cells(snap: dict[str, Any], now: float) -> dict[str, Any]:
    """The cells of one session's row, by column key."""
    state = str(snap.get("state") or "?")
    limit = snap.get("max_runtime") or 0
    runtime = format_duration(runtime_of(snap, now)) + (f"/{format_duration(limit)}" if limit else "")
    gates = len(snap.get("pending_gates") or [])
    human = needs_human(snap)
    rss = snap.get("rss") or 0
    return {
        "id": Text(("! " if human else "  ") + str(snap.get("id")), style="bold magenta" if human else ""),
        "name": str(snap.get("name") or "")[:24],
        "state": Text(state, style=STATE_STYLE.get(state, "")),
        "runtime": runtime,
        "calls": str(snap.get("tool_calls") or 0),
        "repetition": counter_text(snap, "identical_calls"),
        "validation": counter_text(snap, "validation"),
        "loop": counter_text(snap, "loop"),
        "gates": Text(str(gates), style="bold magenta" if gates else "dim"),
        "reason": str(snap.get("termination") or (f"exit {snap.get('exit_code')}" if state == "exited" else "")),
        "usage": usage_text(snap),
        "cpu": f"{snap.get('cpu_percent') or 0:.0f}%",
        "mem": f"{rss / (1 << 20):.0f}M" if rss else "-",
        "adapter": str(snap.get("adapter") or ""),
    }


def matches(snap: dict[str, Any], text: str) -> bool:
    """The filter: every word must appear in the id, name, adapter, state, reason or command; `!` = needs a human."""
    haystack = " ".join(str(snap.get(k) or "") for k in ("id", "name", "adapter", "state", "termination")).lower()
    haystack += " " + " ".join(map(str, snap.get("command") or [])).lower()
    for word in text.lower().split():
        if word == "!":
            if not needs_human(snap):
                return False
        elif word not in haystack:
            return False
    return True


SORTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "id": lambda s: session_number(str(s.get("id"))),
    "attention": lambda s: (not needs_human(s), s.get("state") in FINAL_STATES, session_number(str(s.get("id")))),
    "name": lambda s: (str(s.get("name") or ""), session_number(str(s.get("id")))),
    "state": lambda s: (str(s.get("state") or ""), session_number(str(s.get("id")))),
    "runtime": lambda s: -float(s.get("runtime") or 0),
    "calls": lambda s: -(s.get("tool_calls") or 0),
    "cpu": lambda s: -(s.get("cpu_percent") or 0),
    "mem": lambda s: -(s.get("rss") or 0),
}


class SessionTable(DataTable[Any]):
    """All sessions, filtered and sorted; `show` applies a batch of changed snapshots by row key."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.filter_text = ""
        self.sort_by = "id"
        self._shown: dict[str, dict[str, Any]] = {}
        self.clock: Callable[[], float] = time.time

    def on_mount(self) -> None:
        self.clock = getattr(self.app, "clock", time.time)  # the app's clock, fixed in snapshot tests
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def show(self, snapshots: dict[str, dict[str, Any]], changed: set[str]) -> None:
        """Add, update or remove the rows of `changed` sessions; re-sort only when something moved."""
        moved = False
        now = self.clock()
        for sid in sorted(changed, key=session_number):
            snap = snapshots.get(sid)
            visible = snap is not None and matches(snap, self.filter_text)
            shown = self._shown.get(sid)
            if not visible:
                if shown is not None:
                    self.remove_row(sid)
                    del self._shown[sid]
                continue
            assert snap is not None
            cells = row_cells(snap, now)
            if shown is None:
                self.add_row(*cells.values(), key=sid)
                moved = True
            else:
                for key, value in cells.items():
                    if shown.get(key) != value:  # only the cells that changed
                        self.update_cell(sid, key, value, update_width=True)
                moved = moved or self.sort_by != "id"
            self._shown[sid] = cells
        if moved:
            self._sort(snapshots)

    def rebuild(self, snapshots: dict[str, dict[str, Any]]) -> None:
        """Start over (after the filter changed): rows of hidden sessions go, matching ones come back."""
        self.show(snapshots, set(snapshots) | set(self._shown))

    def resort(self, snapshots: dict[str, dict[str, Any]], sort_by: str) -> None:
        self.sort_by = sort_by
        self._sort(snapshots)

    def _sort(self, snapshots: dict[str, dict[str, Any]]) -> None:
        order = SORTS[self.sort_by]
        selected = self.selected_id()

        def key(cell: Any) -> Any:
            snap = snapshots.get(str(cell).strip("! "))
            return order(snap) if snap else ()

        self.sort("id", key=key)
        if selected in self.rows:
            self.move_cursor(row=self.get_row_index(selected))

    def selected_id(self) -> str | None:
        if not self.row_count:
            return None
        return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
