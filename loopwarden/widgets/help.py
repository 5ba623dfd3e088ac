"""Help on `?`: every key of the console, from the bindings themselves, and what each column means."""

from __future__ import annotations

from collections.abc import Iterable

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .session_table import COLUMN_HELP, COLUMNS

INTRO = ("loopwarden watches every agent session and stops the ones that loop, stall or run away. "
         "Sessions marked ! wait for a human: open the gates queue (g), read the evidence, decide. "
         "Quitting the console never stops a session.")

FILTER_HELP = ("Filter (/): every word must appear in the id, name, adapter, state, reason, interventions "
               "(nudged, blocked, ...), tags, working directory or command; '!' keeps the sessions that need a "
               "human. Escape clears it. "
               "s sorts by the next order, S reverses it (the arrow in the header), h hides the ended sessions, "
               "G groups the rows; space marks a row for a key that then acts on every marked one.")
KEY_NAMES = {"question_mark": "?", "slash": "/", "escape": "esc", "asterisk": "*", "space": "space"}


def key_names(keys: str, sep: str = " or ") -> str:
    """A binding's keys as a person types them: `ctrl+k or K`, `/`, `?`, `esc`."""
    return sep.join(KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))


def key_table(sections: Iterable[tuple[str, Iterable[Binding]]]) -> Group:
    """One small table per section under its title, so a long title does not widen the key column."""
    parts: list[RenderableType] = [Text("")]
    for title, bindings in sections:
        table = Table(box=None, padding=(0, 2), show_header=False)
        table.add_column(style="bold cyan", no_wrap=True, min_width=16)
        table.add_column()
        for binding in bindings:
            table.add_row(key_names(binding.key, ", "), binding.description)
        parts += [Text(title, style="bold"), table, Text("")]
    return Group(*parts)


def column_table() -> Group:
    """Each column of the sessions table, in the table's order, with what it shows."""
    table = Table(box=None, padding=(0, 2), show_header=False)
    table.add_column(style="bold", no_wrap=True, min_width=16)
    table.add_column()
    for key, label in COLUMNS:
        table.add_row(label, COLUMN_HELP[key])
    return Group(Text("Columns of the sessions table", style="bold"), table)


class Help(ModalScreen[None]):
    """Every key, grouped by where it works."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
        Binding("j", "scroll(True)", "Scroll down", show=False),
        Binding("k", "scroll(False)", "Scroll up", show=False),
    ]

    def __init__(self, sections: list[tuple[str, list[Binding]]], read_only: bool) -> None:
        super().__init__()
        self.sections = sections
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield Static("[bold]loopwarden console[/]" + ("  [yellow](read-only)[/]" if self.read_only else ""))
            yield Static(INTRO, classes="hint")
            yield Static(key_table(self.sections))
            yield Static(FILTER_HELP, classes="hint")
            yield Static(column_table(), classes="columns")
            yield Static("Every action, sort and the filter are also in the command palette (ctrl+p). "
                         "j and k scroll; escape closes this help.", classes="hint")

    def action_scroll(self, down: bool) -> None:
        """j and k do what the arrow keys do (a burst of presses adds up)."""
        box = self.query_one(VerticalScroll)
        if down:
            box.action_scroll_down()
        else:
            box.action_scroll_up()
