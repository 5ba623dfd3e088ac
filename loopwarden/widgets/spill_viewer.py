"""A read-only view of a spill file: its first few MiB, read off the UI thread."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Log, Static

from ..supervisor.visible import visible_lines
from .keybar import KeyBar

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


class SpillViewer(Screen[None]):
    """Shows one spill file; escape goes back."""

    CSS = """
    SpillViewer #spill-note { height: auto; padding: 0 1; background: $panel; }
    SpillViewer #spill-text { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Back", id="spill.close")]

    class Loaded(Message):
        def __init__(self, text: SpillText) -> None:
            super().__init__()
            self.text = text

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.loaded: SpillText | None = None

    def compose(self) -> ComposeResult:
        yield Static(f"reading {self.path}…", id="spill-note")
        yield Log(id="spill-text", auto_scroll=False)
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
