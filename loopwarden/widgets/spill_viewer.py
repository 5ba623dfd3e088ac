"""A read-only view of a spill file: its first few MiB, read off the UI thread."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.highlighter import Highlighter
from rich.text import Text

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Log, Static

from ..paths import Paths
from ..supervisor.visible import visible_lines
from .copying import CopyTarget, copy_out, spilled_text
from .keybar import KeyBar
from .search import CURRENT_STYLE, MATCH_STYLE, Search
from .search_bar import SEARCH_KEYS, SearchableScreen, SearchBar, scroll_to_match

MAX_BYTES = 4 << 20
LINE_CHARS = 10_000  # a single huge line is cut for display


@dataclass(frozen=True, slots=True)
class SpillText:
    """What the viewer shows: the lines, and one line about what they are (or why there are none)."""

    lines: list[str]
    note: str


def read_spill(path: str | Path, max_bytes: int = MAX_BYTES) -> SpillText:
    """The first `max_bytes` of a spill file as lines, controls made visible; a missing file is a note, not an error."""
    try:
        with open(path, "rb") as file:
            size = file.seek(0, 2)
            file.seek(0)
            data = file.read(max_bytes)
    except FileNotFoundError:
        return SpillText([], f"{path} is gone: spill files are removed after their retention (24h by default)")
    except OSError as exc:
        return SpillText([], f"cannot read {path}: {exc.strerror or exc}")
    lines = [line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + f"… [{len(line):,} characters]"
             for line in visible_lines(data.decode("utf-8", errors="replace")).splitlines()]
    shown = f"the first {len(data):,} of {size:,} bytes" if size > len(data) else f"{size:,} bytes"
    return SpillText(lines, f"{path}  ({shown}, {len(lines):,} lines, read-only)")


class MatchHighlighter(Highlighter):
    """Styles the search's matches on the line the log is drawing (the log draws one line at a time)."""

    def __init__(self, search: Search) -> None:
        self.search = search
        self.line = 0  # set by the log before it draws a line

    def highlight(self, text: Text) -> None:
        for start, end, current in self.search.on_line(self.line):
            text.stylize(CURRENT_STYLE if current else MATCH_STYLE, start, end)


class SearchLog(Log):
    """A Log whose lines show the search's matches."""

    def __init__(self, search: Search, **kwargs: object) -> None:
        super().__init__(highlight=True, **kwargs)  # type: ignore[arg-type]
        self.highlighter = self.matches = MatchHighlighter(search)

    def render_line(self, y: int) -> Strip:
        self.matches.line = self.scroll_offset.y + y
        return super().render_line(y)

    def redraw(self) -> None:
        """Draw every line again, with the matches as they are now."""
        self.notify_style_update()  # empties the log's cache of drawn lines
        self.refresh()


class SpillViewer(SearchableScreen, Screen[None]):
    """Shows one spill file; `/` searches it, `y` copies it, escape goes back.

    The console's action keys do nothing here (`ACTS_ON_SESSIONS`): a key typed in this view must never
    restart or kill the session behind it.
    """

    ACTS_ON_SESSIONS = False
    HELP_TITLE = "Spill viewer"

    CSS = """
    SpillViewer #spill-note { height: auto; padding: 0 1; background: $panel; }
    SpillViewer #spill-text { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        *SEARCH_KEYS, Binding("y", "copy", "Copy", id="spill.copy"),
        Binding("escape", "close", "Back", id="spill.close")]

    class Loaded(Message):
        def __init__(self, text: SpillText) -> None:
            super().__init__()
            self.text = text

    def __init__(self, path: str, paths: Paths | None = None) -> None:
        super().__init__()
        self.path = path
        self.paths = paths  # the profile whose data directory receives copies
        self.loaded: SpillText | None = None
        self.search = Search()

    def compose(self) -> ComposeResult:
        yield Static(f"reading {self.path}…", id="spill-note")
        yield SearchLog(self.search, id="spill-text", auto_scroll=False)
        yield SearchBar()
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(Log).focus()
        self.load()

    @work(thread=True, exit_on_error=False)
    def load(self) -> None:
        self.post_message(self.Loaded(read_spill(self.path)))

    def on_spill_viewer_loaded(self, message: Loaded) -> None:
        self.loaded = message.text
        self.query_one("#spill-note", Static).update(message.text.note)
        log = self.query_one(Log)
        log.write_lines(message.text.lines, scroll_end=False)
        log.scroll_home(animate=False)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_copy(self) -> None:
        """The file's first MiB, sanitised, to the clipboard and to a private file."""
        if self.loaded is None or not self.loaded.lines:
            self.notify("nothing to copy: the file is not read, or empty", severity="warning")
            return
        copy_out(self.app, CopyTarget("the spill file", spilled_text(self.path)), self.paths)

    # ---- search: over the lines as shown ------------------------------------
    def search_lines(self) -> Sequence[str]:
        return [line.expandtabs() for line in self.query_one(SearchLog).lines]  # as the log draws them

    def search_view(self) -> Widget:
        return self.query_one(SearchLog)

    def search_top(self) -> int:
        return int(self.query_one(SearchLog).scroll_offset.y)

    def show_search(self) -> None:
        log = self.query_one(SearchLog)
        log.redraw()
        found = self.search.match
        if found is not None:
            scroll_to_match(log, found)
