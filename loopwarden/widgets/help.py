"""Help on `?`: every key of the console, from the bindings themselves, and what each column means."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.events import Resize
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from .search import Search
from .search_bar import SEARCH_KEYS, SearchableScreen, SearchBar
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


def help_lines(parts: Sequence[RenderableType], width: int) -> list[Text]:
    """The help drawn at `width` as styled lines of text, so it can be searched and its matches highlighted."""
    console = Console(width=max(20, width), color_system="truecolor", legacy_windows=False)
    lines = console.render_lines(Group(*parts), console.options.update_width(max(20, width)), pad=False)
    return [Text.assemble(*((seg.text, seg.style or "") for seg in line if not seg.control)) for line in lines]


class Help(SearchableScreen, ModalScreen[None]):
    """Every key, grouped by where it works; `/` searches it."""

    DEFAULT_CSS = """
    Help SearchBar { dock: top; }
    Help #help-text { width: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        *SEARCH_KEYS,
        Binding("escape,q,question_mark", "dismiss", "Close"),
        Binding("j", "scroll(True)", "Scroll down", show=False),
        Binding("k", "scroll(False)", "Scroll up", show=False),
    ]
    WIDTH = 84  # the text's width until the dialog has its own (90 columns less its border and padding)

    def __init__(self, sections: list[tuple[str, list[Binding]]], read_only: bool) -> None:
        super().__init__()
        self.sections = sections
        self.read_only = read_only
        self.search = Search()
        self.lines: list[Text] = []
        self._width = 0

    def parts(self) -> list[RenderableType]:
        hint = "dim"
        title = Text("loopwarden console", style="bold") + (Text("  (read-only)", style="yellow")
                                                            if self.read_only else Text(""))
        return [title, Text(""), Text(INTRO, style=hint), key_table(self.sections), Text(FILTER_HELP, style=hint),
                Text(""), column_table(), Text(""),
                Text("Every action, sort and the filter are also in the command palette (ctrl+p). j and k "
                     "scroll; / searches this help (n and N: next and previous match); escape closes it.",
                     style=hint)]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield SearchBar()
            yield Static(id="help-text")

    def on_mount(self) -> None:
        self._lay_out(self.WIDTH)

    def on_resize(self, event: Resize) -> None:
        self._lay_out(self.query_one(VerticalScroll).scrollable_content_region.width)

    def _lay_out(self, width: int) -> None:
        if width > 0 and width != self._width:
            self._width = width
            self.lines = help_lines(self.parts(), width)
            if self.search.active:
                self.search.refresh(self.search_lines())
            self._draw()

    def _draw(self) -> None:
        text = Text("\n").join(self.search.highlight(line, n) for n, line in enumerate(self.lines))
        text.no_wrap = True
        self.query_one("#help-text", Static).update(text)

    def action_scroll(self, down: bool) -> None:
        """j and k do what the arrow keys do (a burst of presses adds up)."""
        box = self.query_one(VerticalScroll)
        if down:
            box.action_scroll_down()
        else:
            box.action_scroll_up()

    # ---- search: over the help's lines as drawn -------------------------------
    def search_lines(self) -> list[str]:
        return [line.plain for line in self.lines]

    def search_view(self) -> Widget:
        return self.query_one(VerticalScroll)

    def show_search(self) -> None:
        self._draw()
        found = self.search.match
        if found is not None:
            box = self.query_one(VerticalScroll)
            top = self.query_one("#help-text").virtual_region.y
            box.scroll_to(y=max(0, top + found.line - box.scrollable_content_region.height // 3), animate=False)
