"""The reset dialog (`x`): which of a session's counters to reset, each shown with its value, or all of them."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from ..supervisor.counters import RESETTABLE
from .dialogs import CHOICE_KEYS, keys_hint

ALL = "all"


def resettable_counters(snap: dict[str, Any]) -> list[tuple[str, float, float]]:
    """(name, value, limit) of each counter of the session an operator can reset, in the snapshot's order."""
    return [(name, float(pair[0]), float(pair[1])) for name, pair in (snap.get("counters") or {}).items()
            if name in RESETTABLE and isinstance(pair, list) and len(pair) == 2]


class ChooseCounter(ModalScreen[str | None]):
    """A list of the session's counters with their values, and "all": the chosen name is the result (None: no)."""

    BINDINGS: ClassVar[list[BindingType]] = CHOICE_KEYS

    def __init__(self, question: str, counters: list[tuple[str, float, float]]) -> None:
        super().__init__()
        self.question = question
        self.counters = counters

    def compose(self) -> ComposeResult:
        options = [Option(Text.assemble(("all", "bold"), ("  every counter below", "dim")), id=ALL)]
        for name, value, limit in self.counters:
            shown = f"{value:g} of {limit:g}" if limit else f"{value:g}, no limit"
            options.append(Option(Text.assemble((f"{name:<18}", "bold"), shown), id=name))
        with Vertical(classes="dialog"):
            yield Label(self.question, markup=False, classes="question")  # names come from agents and commands
            yield OptionList(*options, id="counters")
            yield Label(keys_hint("resets the one highlighted", letters=True), classes="hint keys")

    def on_mount(self) -> None:
        self.query_one(OptionList).highlighted = 0

    def on_resize(self) -> None:
        self.query_one(OptionList).styles.max_height = max(3, self.app.size.height - 12)

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_confirm(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is not None:
            self.dismiss(options.get_option_at_index(options.highlighted).id)

    def action_cancel(self) -> None:
        self.dismiss(None)
