"""The sessions table: one row per session, updated by row key and changed cells only."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets.data_table import ColumnKey, RowKey

from ..runtime.ending import INTERVENTION_WORDS, ending, interventions, where_cell
from ..supervisor.cost import show_cost
from ..supervisor.config import format_duration
from ..supervisor.verdicts import FINAL_STATES, SessionState
from ..supervisor.visible import visible
from .grouping import GROUP_COLUMN, Grouping
from .selection import Selection
from .table_lines import cells_line, drawn_cell

COLUMNS = (("id", "ID"), ("name", "NAME"), ("state", "STATE"), ("interventions", "INTERVENED"),
           ("reason", "ENDED"), ("runtime", "RUNTIME"), ("calls", "CALLS"), ("gates", "GATES"),
           ("repetition", "REPEAT"), ("validation", "VALID"), ("loop", "LOOP"), ("usage", "COST"),
           ("cpu", "CPU"), ("mem", "MEM"), ("where", "WHERE"), ("agent", "AGENT"), ("adapter", "ADAPTER"),
           ("tags", "TAGS"))
HOST_COLUMN = (("host", "HOST"),)  # after ID, only when the console shows more than one host (console --host)
# most telling first: at 80 columns the table shows what loopwarden did and how sessions ended, the rest scrolls

COLUMN_HELP: dict[str, str] = {  # the help page's explanation of each column (tests keep it complete)
    "id": "the session's id (host:id for another machine's); ! marks a session waiting for a human (a gate: g)",
    "name": "its name (--name, else the command's name)",
    "state": "starting, running, paused (by you), gated (waiting for a human), exited, terminated or lost",
    "interventions": "what loopwarden did to the agent so far: nudged (a message), blocked (a call refused), "
                     "gated (asked a human), spilled (large output to a file), escalated, ...",
    "reason": "why it ended: its exit code, the signal that killed it, or the rule that terminated it",
    "runtime": "how long it has run / its max_runtime limit",
    "calls": "tool calls the agent made",
    "gates": "gates waiting for a human now",
    "repetition": "identical calls in a row / the limit before calls are blocked",
    "validation": "invalid lines or messages in a row / the limit before the session is terminated",
    "loop": "the task's loop count / the limit before a human is asked",
    "usage": "the cost in dollars (the agent's own figure, else priced from the table; ? when the model has no "
             "price), else its tokens (`tok`)",
    "cpu": "CPU of its process tree (100% = one core)",
    "mem": "memory of its process tree while it runs",
    "where": "where its agent runs: node/pod for a session on a cluster (run --on kubernetes), - on this machine; "
             "shown once a session runs on a cluster",
    "agent": "the agent it runs (claude-code, codex, gemini, ...)",
    "adapter": "how loopwarden talks to it (native, plain, claude-code, codex, acp, ...)",
    "tags": "the labels given with `run --tag` or `set ID tag=NAME`; G groups the rows by tag, among others",
}

# verdict action: (the words after it was done, colour); in the order shown
INTERVENTION_STYLE: dict[str, str] = {  # by verdict action; the words are runtime/ending.py's
    "nudge": "yellow", "block": "bold red", "gate": "magenta", "escalate": "bold yellow", "force_next": "cyan",
    "unblock_authority": "green", "spill": "cyan"}

STATE_STYLE: dict[str, str] = {
    SessionState.RUNNING: "green", SessionState.GATED: "bold magenta", SessionState.PAUSED: "yellow",
    SessionState.STOPPING: "yellow", SessionState.EXITED: "dim", SessionState.TERMINATED: "red",
    SessionState.LOST: "red", SessionState.STARTING: "cyan"}


def session_number(sid: str) -> int:
    """s12 -> 12; box:s12 (another host's) -> 12 too."""
    sid = sid.rpartition(":")[2]
    return int(sid[1:]) if sid[1:].isdigit() else 0


def natural_key(text: str) -> tuple[Any, ...]:
    """s2 before s10: the digit runs compare as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text.lower()))


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
    """The session's cost in dollars (reported by the agent or priced from the table; "?" for a model with no
    price), else its tokens."""
    shown = show_cost(snap.get("cost"))
    if shown:
        return shown
    counters = snap.get("counters") or {}
    cost = (counters.get("cost_usd") or [0])[0]
    tokens = (counters.get("tokens") or [0])[0]
    if cost:
        return f"${cost:.2f}"
    if tokens:
        return f"{tokens / 1000:.1f}k tok" if tokens >= 1000 else f"{tokens:g} tok"  # no price: say they are tokens
    return "-"


def interventions_text(snap: dict[str, Any]) -> Text:
    """`nudged 2 blocked 1`, each kind in its verdict's colour; `-` for a session left alone."""
    out = Text()
    for action, words, count in interventions(snap):
        out.append(" " if out else "")
        out.append(f"{words} {count}", style=INTERVENTION_STYLE.get(action, ""))
    return out or Text("-", style="dim")


def ended_text(snap: dict[str, Any]) -> Text:
    """Why it ended, in a few words; the state column already says terminated or lost."""
    words = ending(snap, short=True)
    state = str(snap.get("state") or "")
    if state == SessionState.LOST and snap.get("resumable"):
        words += ", continuable (c)"
    style = "dim" if words == "exited 0" else "yellow" if state == SessionState.EXITED else "red"
    return Text(words.removeprefix(f"{state}: "), style=style if words else "")


def memory_of(snap: dict[str, Any]) -> int:
    """The RSS of its process tree; 0 once it ended (its last sample is not its use: the MEM cell says -)."""
    return 0 if snap.get("state") in FINAL_STATES else int(snap.get("rss") or 0)


def row_cells(snap: dict[str, Any], now: float) -> dict[str, Text]:
    """The cells of one session's row, by column key; all `Text`, so `[` in a name is never markup."""
    state = str(snap.get("state") or "?")
    limit = snap.get("max_runtime") or 0
    runtime = format_duration(runtime_of(snap, now)) + (f"/{format_duration(limit)}" if limit else "")
    gates = len(snap.get("pending_gates") or [])
    human = needs_human(snap)
    rss = memory_of(snap)
    cells = {
        "id": Text(("! " if human else "  ") + str(snap.get("id")), style="bold magenta" if human else ""),
        "host": Text(visible(str(snap.get("host") or "local"))),
        "name": Text(str(snap.get("name") or "")[:24]),
        "state": Text(state, style=STATE_STYLE.get(state, "")),
        "runtime": Text(runtime),
        "calls": Text(str(snap.get("tool_calls") or 0)),
        "repetition": counter_text(snap, "identical_calls"),
        "validation": counter_text(snap, "validation"),
        "loop": counter_text(snap, "loop"),
        "interventions": interventions_text(snap),
        "gates": Text(str(gates), style="bold magenta" if gates else "dim"),
        "reason": ended_text(snap),
        "usage": Text(usage_text(snap)),
        "cpu": Text(f"{snap.get('cpu_percent') or 0:.0f}%"),
        "mem": Text(f"{rss / (1 << 20):.0f}M" if rss else "-"),
        "where": Text(where_cell(snap) or "-", style="" if snap.get("pod") else "dim"),
        "agent": Text(visible(str(snap.get("agent") or ""))),
        "adapter": Text(visible(str(snap.get("adapter") or ""))),
        "tags": Text(visible(",".join(map(str, snap.get("tags") or []))) or "-", style="cyan"),
    }
    gone = snap.get("host_gone")  # its host is not connected now: its last state is not known to be current
    return stale(cells, state, float(gone), now) if isinstance(gone, (int, float)) else cells


def stale(cells: dict[str, Text], state: str, gone_at: float, now: float) -> dict[str, Text]:
    """The row of a session whose host went away: its last known state, said stale and since when, all dimmed."""
    ago = format_duration(max(0.0, now - gone_at))
    cells["state"] = Text(f"{state} · stale, host lost {ago} ago", style="red")
    for cell in cells.values():
        cell.stylize("dim")
    return cells


def matches(snap: dict[str, Any], text: str, hide_ended: bool = False) -> bool:
    """The filter: every word must appear in the id, name, adapter, state, reason (raw or as ENDED says it),
    interventions, command or WHERE (a pod's node and name);
    `!` = needs a human. `hide_ended` leaves out the sessions that have ended."""
    if hide_ended and snap.get("state") in FINAL_STATES:
        return False
    if not text:
        return True
    fields = ("id", "host", "name", "agent", "adapter", "state", "termination", "cwd")
    haystack = " ".join(str(snap.get(k) or "") for k in fields).lower() + " " + where_cell(snap).lower()
    haystack += " " + " ".join(map(str, snap.get("tags") or [])).lower()
    haystack += " " + " ".join(map(str, snap.get("command") or [])).lower()
    haystack += " " + " ".join(INTERVENTION_WORDS.get(k, k) for k in snap.get("interventions") or {})
    haystack += " " + ending(snap, short=True).lower()  # the ENDED column's words: killed, sigkill, max runtime
    for word in text.lower().split():
        if word == "!":
            if not needs_human(snap):
                return False
        elif word not in haystack:
            return False
    return True


def _by_id(s: dict[str, Any]) -> tuple[bool, str, int]:
    """This machine's sessions first, then each host's, each by number."""
    host = str(s.get("host") or "local")
    return host != "local", host, session_number(str(s.get("id")))


# each order's key, first in its natural direction (names A to Z, the longest runtime first)
SORTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "id": _by_id,
    "attention": lambda s: (not needs_human(s), s.get("state") in FINAL_STATES, _by_id(s)),
    "name": lambda s: (natural_key(str(s.get("name") or "")), _by_id(s)),
    "state": lambda s: (str(s.get("state") or ""), _by_id(s)),
    "interventions": lambda s: (-sum((s.get("interventions") or {}).values()), _by_id(s)),
    "runtime": lambda s: -runtime_of(s, time.time()),  # a quiet live session publishes no new runtime
    "calls": lambda s: -(s.get("tool_calls") or 0),
    "cpu": lambda s: -(s.get("cpu_percent") or 0),
    "mem": lambda s: -memory_of(s),
    "project": lambda s: (natural_key(str(s.get("cwd") or "")), _by_id(s)),
    "tag": lambda s: (not s.get("tags"), sorted(s.get("tags") or []), _by_id(s)),
}
DESCENDING = frozenset({"interventions", "runtime", "calls", "cpu", "mem"})  # natural direction: most first
# the column whose header shows the order's arrow, when not its own name
SORT_COLUMN = {"attention": "gates", "tag": "tags"}


def sort_arrow(sort_by: str, reverse: bool) -> str:
    """▲ ascending, ▼ descending, as the rows are shown."""
    return "▼" if (sort_by in DESCENDING) != reverse else "▲"


def same_cell(a: Text, b: Text) -> bool:
    return a.plain == b.plain and a.style == b.style and a.spans == b.spans


class Column:
    """One column: its key (`.key.value`), label and the width of its widest cell (grows, never shrinks, until a
    rebuild)."""

    __slots__ = ("content_width", "key", "label", "name")

    def __init__(self, key: str, label: str) -> None:
        self.name = key
        self.key = ColumnKey(key)
        self.label = Text(label)
        self.content_width = self.label.cell_len

    @property
    def render_width(self) -> int:
        return self.content_width + 2  # one space of padding either side


class Row:
    """One session's row: its key (`.key.value`), cells by column key, and a version bumped when a cell changes."""

    __slots__ = ("cells", "key", "version")

    def __init__(self, sid: str, cells: dict[str, Text]) -> None:
        self.key = RowKey(sid)
        self.cells = cells
        self.version = 0


# the table's look (its DEFAULT_CSS): header, stripes, cursor focused or not, marked rows
TABLE_CSS = """
SessionTable {
    background: $surface;
    color: $foreground;
    height: auto;
    max-height: 100%;
    &:focus {
        background-tint: $foreground 5%;
        & > .session-table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .session-table--header { background-tint: $foreground 5%; }
    }
    &:dark > .session-table--even-row { background: $surface-darken-1 40%; }
    & > .session-table--header { text-style: bold; background: $panel; color: $foreground; }
    &:ansi > .session-table--header { background: ansi_bright_blue; color: ansi_default; }
    & > .session-table--even-row { background: $surface-lighten-1 50%; }
    & > .session-table--marked { background: $accent 35%; text-style: bold; }
    & > .session-table--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
        text-style: $block-cursor-blurred-text-style;
    }
}
"""


class SessionTable(ScrollView, can_focus=True):
    """All sessions, filtered and sorted; `show` applies a batch of changed snapshots by row key.

    One line per row, the header fixed on top. Each row's rendered line is cached and rebuilt only when
    its cells, its place (cursor, zebra stripe), the column widths or the styles change: a tick that
    changes k rows renders k lines.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,ctrl+home", "first", "First", show=False),
        Binding("end,ctrl+end", "last", "Last", show=False),
        Binding("space", "toggle_mark", "Mark or unmark (keys then act on all marked)", id="mark", show=False),
        Binding("shift+down", "mark_and_move(1)", "Mark, move down", id="mark_down", show=False),
        Binding("shift+up", "mark_and_move(-1)", "Mark, move up", id="mark_up", show=False),
        Binding("V", "mark_range", "Mark from the last mark to here", id="mark_range", show=False),
        Binding("asterisk", "mark_shown", "Mark every row shown (filtered)", id="mark_shown", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"session-table--header", "session-table--even-row",
                                             "session-table--odd-row", "session-table--cursor",
                                             "session-table--marked"}

    DEFAULT_CSS = TABLE_CSS

    class RowSelected(Message):
        """Enter (or a click on the cursor row) on a row; `row_key.value` is the session id."""

        def __init__(self, table: SessionTable, row_key: str, cursor_row: int) -> None:
            super().__init__()
            self.table = table
            self.row_key = RowKey(row_key)
            self.cursor_row = cursor_row

        @property
        def control(self) -> SessionTable:
            return self.table

    def __init__(self, *, hosts: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.filter_text = ""
        self.sort_by = "id"
        self.sort_reverse = False
        self.hide_ended = False
        self.grouping = Grouping()  # rows of one group together, a GROUP column (G)
        self.placed = False  # a session on a cluster was shown: the WHERE column too, from then on
        self.clock: Callable[[], float] = time.time
        self.columns: dict[ColumnKey, Column] = {}
        for key, label in (GROUP_COLUMN,) + (COLUMNS[:1] + HOST_COLUMN + COLUMNS[1:] if hosts else COLUMNS):
            column = Column(key, label)
            self.columns[column.key] = column
        self._column_list = self._shown_columns()
        self.columns[ColumnKey(self.sort_by)].content_width += 2  # the arrow of the first order
        self.rows: dict[str, Row] = {}
        self._order: list[str] = []
        self._index: dict[str, int] = {}
        self._cursor = 0
        self._widths_version = 0
        self._line_cache: dict[str, tuple[tuple[Any, ...], Strip]] = {}
        self._header_cache: tuple[tuple[Any, ...], Strip] | None = None
        self.selection = Selection()  # rows marked for an action on many (space, shift+arrows, V, *)

    def on_mount(self) -> None:
        self.clock = getattr(self.app, "clock", time.time)  # the app's clock, fixed in snapshot tests
        self._update_virtual_size()

    # ---- the public view of the rows ------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def ordered_rows(self) -> list[Row]:
        return [self.rows[sid] for sid in self._order]

    def get_row_index(self, row_key: str | RowKey) -> int:
        return self._index[_key(row_key)]

    def get_cell(self, row_key: str | RowKey, column_key: str | ColumnKey) -> Text:
        return self.rows[_key(row_key)].cells[_key(column_key)]

    @property
    def cursor_row(self) -> int:
        return self._cursor

    def selected_id(self) -> str | None:
        return self._order[self._cursor] if self._order else None

    def move_cursor(self, *, row: int | None = None, scroll: bool = True) -> None:
        if row is None:
            return
        old = self._cursor
        self._cursor = max(0, min(row, self.row_count - 1))
        if old != self._cursor:
            self._refresh_row(old)
            self._refresh_row(self._cursor)
        if scroll:
            self._scroll_cursor_into_view()

    # ---- data -------------------------------------------------------------------------
    def show(self, snapshots: dict[str, dict[str, Any]], changed: set[str]) -> None:
        """Add, update or remove the rows of `changed` sessions; re-sort only when something moved."""
        selected = self.selected_id()
        moved = False
        widths = False
        dirty: list[str] = []
        now = self.clock()
        for sid in sorted(changed, key=session_number):
            snap = snapshots.get(sid)
            visible = snap is not None and matches(snap, self.filter_text, self.hide_ended)
            row = self.rows.get(sid)
            if not visible:
                if row is not None:
                    self.selection.keys.discard(sid)
                    del self.rows[sid]
                    self._line_cache.pop(sid, None)
                    self._order.remove(sid)
                    moved = True
                continue
            assert snap is not None
            cells = row_cells(snap, now)
            if snap.get("pod") and not self.placed:
                self.placed = widths = True
                self._column_list = self._shown_columns()
            if row is None:
                self.rows[sid] = Row(sid, cells)
                self._order.append(sid)
                moved = True
            else:
                if any(not same_cell(row.cells[k], v) for k, v in cells.items()):  # only rows that changed
                    row.cells = cells
                    row.version += 1
                    dirty.append(sid)
                moved = moved or self.sort_by != "id" or self.sort_reverse or bool(self.grouping.by)
            for column in self._column_list:
                if column.name not in cells:
                    continue  # the GROUP column: sized when the rows are grouped (_settle)
                width = cells[column.name].cell_len
                if width > column.content_width:
                    column.content_width = width
                    widths = True
        if widths:
            self._widths_version += 1
        self._settle(snapshots, selected, moved, widths, dirty)

    def rebuild(self, snapshots: dict[str, dict[str, Any]]) -> None:
        """Start over (after the filter changed): rows of hidden sessions go, matching ones come back."""
        self.show(snapshots, set(snapshots) | set(self.rows))
        changed = False
        for column in self._column_list:  # the widths fit the rows shown now, narrower too
            width = self._fit(column)
            changed = changed or width != column.content_width
            column.content_width = width
        if changed:
            self._widths_version += 1
            self._update_virtual_size()
            self.refresh()

    def resort(self, snapshots: dict[str, dict[str, Any]], sort_by: str, reverse: bool | None = None) -> None:
        """Order the rows by `sort_by` (a key of SORTS), reversed or not (unchanged when None)."""
        self.sort_by = sort_by
        if reverse is not None:
            self.sort_reverse = reverse
        column = self.columns.get(ColumnKey(self.sort_column))
        # room for the arrow; like every width it grows and is kept until a rebuild, so cycling the orders
        # does not re-render every row each time
        widths = column is not None and column.content_width < column.label.cell_len + 2
        if column is not None and widths:
            column.content_width = column.label.cell_len + 2
            self._widths_version += 1
        self._settle(snapshots, self.selected_id(), True, widths, [])
        self.refresh()  # the header's arrow

    def _fit(self, column: Column) -> int:
        """The width of a column's widest cell or its header (with the arrow when it is the sorted one)."""
        label = column.label.cell_len + (2 if column.name == self.sort_column else 0)
        if column.name == GROUP_COLUMN[0]:
            return max(label, self.grouping.width())
        return max([label] + [row.cells[column.name].cell_len for row in self.rows.values()])

    @property
    def sort_column(self) -> str:
        """The column whose header carries the arrow."""
        return SORT_COLUMN.get(self.sort_by, self.sort_by)

    @property
    def sort_text(self) -> str:
        """`runtime ▼`: the order and its direction, for the status line."""
        return f"{self.sort_by} {sort_arrow(self.sort_by, self.sort_reverse)}"

    def _shown_columns(self) -> list[Column]:
        """Every column, the GROUP column first only while the rows are grouped, WHERE once a pod session is."""
        hidden = {GROUP_COLUMN[0]: not self.grouping.by, "where": not self.placed}
        return [c for c in self.columns.values() if not hidden.get(c.name)]

    @property
    def group_by(self) -> str | None:
        return self.grouping.by

    def regroup(self, snapshots: dict[str, dict[str, Any]], group_by: str | None) -> None:
        """Group the rows by `group_by` (a key of grouping.GROUPS), or not at all (None)."""
        self.grouping.by = group_by
        self._column_list = self._shown_columns()
        self._widths_version += 1
        self._settle(snapshots, self.selected_id(), True, True, [])
        self.refresh()

    def _settle(self, snapshots: dict[str, dict[str, Any]], selected: str | None, moved: bool, widths: bool,
                dirty: list[str]) -> None:
        """Sort if rows moved, keep the cursor on the selected session, repaint only what changed."""
        reordered = False
        if moved:
            order = SORTS[self.sort_by]
            before = list(self._order)
            self._order.sort(key=lambda sid: order(snapshots[sid]) if sid in snapshots else (),
                             reverse=self.sort_reverse)
            regrouped = self.grouping.arrange(self._order, snapshots, natural_key)
            reordered = regrouped or self._order != before or len(self._index) != len(self._order)
            if reordered:
                self._index = {sid: i for i, sid in enumerate(self._order)}
            if regrouped and self.grouping.widen(self.columns[ColumnKey(GROUP_COLUMN[0])]):
                widths = True
                self._widths_version += 1
        if reordered or widths:
            self._update_virtual_size()
        if selected in self._index:
            self.move_cursor(row=self._index[selected], scroll=reordered)
        else:
            self.move_cursor(row=self._cursor, scroll=reordered)
        if reordered or widths:
            self.refresh()
        else:
            for sid in dirty:
                self._refresh_row(self._index[sid])

    def _update_virtual_size(self) -> None:
        width = sum(column.render_width for column in self._column_list)
        self.virtual_size = Size(width, self.row_count + 1)

    def _refresh_row(self, index: int) -> None:
        if 0 <= index < self.row_count:
            self.refresh_line(index + 1)  # below the header

    def _scroll_cursor_into_view(self) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)  # rows below the header
        top = int(self.scroll_y)
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, force=True, immediate=True)
        elif self._cursor >= top + visible:
            self.scroll_to(y=self._cursor - visible + 1, animate=False, force=True, immediate=True)

    # ---- rendering --------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        base_style = self.rich_style
        if y == 0:
            strip = self._header_strip(width)
        else:
            index = y - 1 + scroll_y
            if not 0 <= index < self.row_count:
                return Strip.blank(width, base_style)
            strip = self._row_strip(index, width)
        return strip.crop_extend(scroll_x, scroll_x + width, base_style)

    def _header_strip(self, width: int) -> Strip:
        style = self.get_component_rich_style("session-table--header")
        key = (self._widths_version, style, width, self.sort_by, self.sort_reverse)
        if self._header_cache is None or self._header_cache[0] != key:
            arrow = " " + sort_arrow(self.sort_by, self.sort_reverse)
            labels = [column.label + arrow if column.name == self.sort_column else column.label
                      for column in self._column_list]
            strip = cells_line(self._column_list, labels, (style, None), width, self.app.console)
            self._header_cache = (key, strip)
        return self._header_cache[1]

    def _row_strip(self, index: int, width: int) -> Strip:
        sid = self._order[index]
        row = self.rows[sid]
        cursor = index == self._cursor
        marked = sid in self.selection
        style = self.get_component_rich_style("session-table--odd-row" if index % 2 else "session-table--even-row")
        if marked:
            style += self.get_component_rich_style("session-table--marked")
        cursor_style = self.get_component_rich_style("session-table--cursor") if cursor else None
        group = self.grouping.labels.get(sid)
        key = (row.version, self._widths_version, style, cursor_style, width, marked, group and group.plain)
        cached = self._line_cache.get(sid)
        if cached is not None and cached[0] == key:
            return cached[1]
        cells = [drawn_cell(row, column.name, marked, group) for column in self._column_list]
        # the cursor's colour wins over the cells' own, as in a DataTable
        styles = (style, None) if cursor_style is None else \
            (style + cursor_style, Style.from_color(color=cursor_style.color))
        strip = cells_line(self._column_list, cells, styles, width, self.app.console)
        self._line_cache[sid] = (key, strip)
        return strip

    # ---- keys and mouse -----------------------------------------------------------------
    def action_cursor_up(self) -> None:
        self.move_cursor(row=self._cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self._cursor + 1)

    def action_page_up(self) -> None:
        self.move_cursor(row=self._cursor - max(1, self.scrollable_content_region.height - 1))

    def action_page_down(self) -> None:
        self.move_cursor(row=self._cursor + max(1, self.scrollable_content_region.height - 1))

    def action_first(self) -> None:
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self.move_cursor(row=self.row_count - 1)

    # ---- marking rows for an action on many ------------------------------------------------
    @property
    def marked(self) -> list[str]:
        """The marked sessions, in the table's order."""
        return self.selection.ordered(self._order)

    def _repaint(self, sids: Iterable[str]) -> None:
        for sid in set(sids) & self._index.keys():
            self._refresh_row(self._index[sid])

    def action_toggle_mark(self) -> None:
        sid = self.selected_id()
        if sid is not None:
            self.selection.toggle(sid)
            self._repaint([sid])

    def action_mark_and_move(self, step: int) -> None:
        """Mark the cursor's row and the next one, as shift+arrows extend a selection in an editor."""
        if self._order:
            self._repaint(self.selection.step(self._order, self._cursor, step))
            self.move_cursor(row=self._cursor + step)

    def action_mark_range(self) -> None:
        sid = self.selected_id()
        if sid is not None:
            self._repaint(self.selection.extend(self._order, sid))

    def action_mark_shown(self) -> None:
        """Mark every row the filter shows."""
        self.selection.add(self._order)
        self.refresh()

    def clear_marks(self) -> bool:
        """Unmark every row; False when none was marked."""
        was = self.selection.clear()
        self._repaint(was)
        return bool(was)

    def action_select_cursor(self) -> None:
        sid = self.selected_id()
        if sid is not None:
            self.post_message(self.RowSelected(self, sid, self._cursor))

    def on_click(self, event: events.Click) -> None:
        if event.y < 1:
            return  # the header
        index = event.y - 1 + int(self.scroll_y)
        if not 0 <= index < self.row_count:
            return
        event.stop()
        if index == self._cursor:
            self.action_select_cursor()
        else:
            self.move_cursor(row=index)


def _key(key: Any) -> str:
    return str(key.value) if isinstance(key, (RowKey, ColumnKey)) else str(key)
