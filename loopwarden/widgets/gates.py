"""The gates queue: every pending gate across all sessions, oldest first, with the evidence that opened it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from ..supervisor.config import format_duration
from ..supervisor.evidence import fact, record_line, records
from ..supervisor.messages import clip
from .diffs import gate_changes_text
from .keybar import KeyBar
from .selection import MARK, Selection

DRAW_SECONDS = 0.25
DIFF_LINK = Style(underline=True, meta={"@click": "app.diff"})


def evidence_text(gate: dict[str, Any]) -> Text:
    """The gate's reason and its evidence, one fact per line; the change its call would make, coloured."""
    out = Text()
    out.append(f"{gate.get('ref')}  ", style="bold magenta")
    out.append(f"{gate.get('name') or ''}  rule {gate.get('rule')}\n", style="bold")
    out.append(f"{gate.get('reason') or ''}\n\n")
    evidence = gate.get("evidence") or {}
    for key, value in (evidence.items() if isinstance(evidence, dict) else [("evidence", evidence)]):
        if records(value):
            out.append(f"{key}:\n", style="bold")
            for i, item in enumerate(value, 1):
                out.append(f"  {i:>2}. {record_line(item)}\n")
        else:
            out.append(f"{key}: ", style="bold")
            out.append(fact(str(key), value, 400) + "\n")
    changes = gate.get("changes")
    if isinstance(changes, dict):
        gate_changes_text(changes, out)
    out.append("\n")
    out.append("v: the session's diff so far", style=DIFF_LINK)  # a link: a click opens it too (in a browser)
    out.append("\n")
    return out


class GatesQueue(Screen[None]):
    """Pending gates, oldest first; the app's gate keys act on the highlighted one, enter opens its session."""

    HELP_TITLE = "Gates queue"

    class OpenSession(Message):
        """Enter on a gate: the app opens the detail of the session that asked."""

        def __init__(self, session_id: str) -> None:
            super().__init__()
            self.session_id = session_id

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Sessions", id="back"),  # with gates marked, it unmarks them first
        Binding("g", "app.pop_screen", "Sessions", id="gates.back", show=False),
        Binding("enter", "open_session", "Open its session", id="open-session"),
        Binding("a", "app.approve", "Approve", id="approve"),  # the app's ids: a key the user rebinds moves here too
        Binding("w", "app.approve_with_guidance", "Guidance", id="guidance"),
        Binding("d", "app.deny", "Deny", id="deny"),
        Binding("u", "app.grant", "Grant", id="grant"),
        Binding("x", "app.reset", "Reset", id="reset"),
        Binding("v", "app.diff", "Diff so far", id="gates.diff"),
        Binding("j", "move_cursor(1)", "Down", show=False),
        Binding("k", "move_cursor(-1)", "Up", show=False),
        Binding("space", "toggle_mark", "Mark or unmark (a, d then act on all marked)", id="gates.mark", show=False),
        Binding("shift+down", "mark_and_move(1)", "Mark, move down", id="gates.mark_down", show=False),
        Binding("shift+up", "mark_and_move(-1)", "Mark, move up", id="gates.mark_up", show=False),
        Binding("asterisk", "mark_all", "Mark every gate", id="gates.mark_all", show=False),
    ]

    def __init__(self, gates_of: Callable[[], list[dict[str, Any]]], clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.gates_of = gates_of
        self.clock = clock
        self._refs: tuple[str, ...] = ()
        self._by_ref: dict[str, dict[str, Any]] = {}
        self._evidence_of: dict[str, Any] | None = None
        self.selection = Selection()  # gates marked for approve or deny on many

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="gates", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="evidence-box"):
            yield Static("No gate is waiting.", id="evidence")
        yield KeyBar()

    def on_mount(self) -> None:
        table = self.query_one("#gates", DataTable)
        for key, label in (("ref", "GATE"), ("name", "SESSION"), ("rule", "RULE"), ("age", "WAITING"),
                           ("reason", "REASON")):
            table.add_column(label, key=key)
        self.draw()
        self.set_interval(DRAW_SECONDS, self.draw)

    def draw(self) -> None:
        if not self.is_current:  # installed once and kept; only the screen on top draws
            return
        gates = self.gates_of()
        table = self.query_one("#gates", DataTable)
        refs = tuple(g["ref"] for g in gates)
        self._by_ref = {g["ref"]: g for g in gates}
        now = self.clock()
        if refs != self._refs:
            selected = self.selected()
            table.clear()
            self.selection.keep_only(refs)  # a decided gate leaves the queue and its mark
            for gate in gates:
                table.add_row(self._ref_cell(gate["ref"]), Text(gate.get("name") or ""),
                              Text(gate.get("rule") or ""), "", Text(clip(gate.get("reason") or "", 90)),
                              key=gate["ref"])  # a str cell is markup
            self._refs = refs
            if selected is not None and selected["ref"] in table.rows:
                table.move_cursor(row=table.get_row_index(selected["ref"]))
        for gate in gates:
            table.update_cell(gate["ref"], "age", format_duration(max(0.0, now - (gate.get("opened_at") or now))))
        self.show_evidence()

    def on_screen_resume(self) -> None:
        self.draw()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_evidence()

    @on(DataTable.RowSelected, "#gates")
    def action_open_session(self) -> None:
        gate = self.selected()
        if gate is not None and gate.get("session"):
            self.post_message(self.OpenSession(str(gate["session"])))

    def show_evidence(self) -> None:
        gate = self.selected()
        if gate is self._evidence_of and gate is not None:
            return
        self._evidence_of = gate
        box = self.query_one("#evidence", Static)
        box.update(evidence_text(gate) if gate else "No gate is waiting.")

    def selected(self) -> dict[str, Any] | None:
        found = self.query("#gates").results(DataTable)
        table = next(found, None)  # gone while the app closes, and the app's timer still asks
        if table is None or not table.row_count:
            return None
        ref = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self._by_ref.get(str(ref))

    # ---- marking gates for approve or deny on many -------------------------------------------
    @property
    def marked(self) -> list[dict[str, Any]]:
        """The marked gates, oldest first."""
        return [self._by_ref[ref] for ref in self.selection.ordered(self._refs) if ref in self._by_ref]

    def _ref_cell(self, ref: str) -> Text:
        return Text(f"{MARK} {ref}", style="bold reverse") if ref in self.selection else Text(ref)

    def _redraw_marks(self, refs: list[str]) -> None:
        table = self.query_one("#gates", DataTable)
        for ref in refs:
            if ref in table.rows:
                table.update_cell(ref, "ref", self._ref_cell(ref), update_width=True)  # the mark widens it

    def action_toggle_mark(self) -> None:
        gate = self.selected()
        if gate is not None:
            self.selection.toggle(gate["ref"])
            self._redraw_marks([gate["ref"]])

    def action_mark_and_move(self, rows: int) -> None:
        gate = self.selected()
        if gate is None:
            return
        self.action_move_cursor(rows)
        after = self.selected() or gate
        self.selection.add([gate["ref"], after["ref"]])
        self._redraw_marks([gate["ref"], after["ref"]])

    def action_mark_all(self) -> None:
        self.selection.add(self._refs)
        self._redraw_marks(list(self._refs))

    def action_back(self) -> None:
        """Escape unmarks the marked gates first, then goes back to the sessions."""
        was = self.selection.clear()
        if was:
            self._redraw_marks(list(was))
        else:
            self.app.pop_screen()

    def action_move_cursor(self, rows: int) -> None:
        """j and k, as in k9s, lazygit and htop."""
        table = self.query_one("#gates", DataTable)
        table.move_cursor(row=table.cursor_row + rows)
