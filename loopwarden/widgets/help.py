"""Help on `?`: every key of the console, from the bindings themselves, so it cannot drift."""

from __future__ import annotations

from collections.abc import Iterable

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

INTRO = ("loopwarden watches every agent session and stops the ones that loop, stall or run away. "
         "Sessions marked ! wait for a human: open the gates queue (g), read the evidence, decide. "
         "Quitting the console never stops a session.")

FILTER_HELP = ("Filter (/): every word must appear in the id, name, adapter, state, reason or command; "
               "'!' keeps the sessions that need a human. Escape clears it.")


def key_table(sections: Iterable[tuple[str, Iterable[Binding]]]) -> Table:
    table = Table(box=None, padding=(0, 2), show_header=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for title, bindings in sections:
        table.add_row(f"[bold]{title}[/]", "")
        for binding in bindings:
            keys = ", ".join(k.strip() for k in binding.key.split(","))
            table.add_row(keys.replace("question_mark", "?").replace("slash", "/"), binding.description)
        table.add_row("", "")
    return table


class Help(ModalScreen[None]):
    """Every key, grouped by where it works."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

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
            yield Static("Every action is also in the command palette (ctrl+p). Escape closes this help.",
                         classes="hint")
