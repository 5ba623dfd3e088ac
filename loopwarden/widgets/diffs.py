"""What an agent changed: a diff coloured line by line, and the screen that shows a session's diff, kept current.

Every line is agent text: it arrives made visible (runtime/visible.py, through the feed's `request`) and is drawn
as a Text, never as markup, so no escape sequence or markup in it acts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header, Static

from ..paths import Paths
from ..runtime.client import DaemonError
from ..supervisor.visible import visible, visible_lines
from .feed import request
from .keybar import KeyBar

POLL_SECONDS = 2.0  # the diff read again while the screen is shown (a modest rate: the daemon reads the store)
LINES_SHOWN = 20_000  # patch lines drawn at most; the rest is counted, not drawn
MARKS = {"modified": "M", "added": "A", "deleted": "D", "renamed": "R"}
STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def line_style(line: str) -> str:
    """A diff line's colour: added green, removed red, hunk headers cyan, file headers bold."""
    return next((style for prefix, style in STYLES if line.startswith(prefix)), "")


def diff_lines(lines: Iterable[str], out: Text | None = None, limit: int = LINES_SHOWN) -> Text:
    """The diff's lines, each coloured by its first characters (tabs kept, every other control escaped)."""
    text = Text() if out is None else out
    left = 0
    for n, line in enumerate(lines):
        if n >= limit:
            left += 1
            continue
        text.append(visible_lines(line).replace("\n", "\\n") + "\n", style=line_style(line))
    if left:
        text.append(f"… {left:,} more lines not shown\n", style="italic")
    return text


def files_text(files: list[dict[str, Any]], out: Text | None = None) -> Text:
    """One line a file: its status letter, +added -removed, the path (and a renamed file's old path)."""
    text = Text() if out is None else out
    for f in files:
        text.append(f"{MARKS.get(str(f.get('status')), '?')} ", style="bold")
        text.append(f"+{f.get('added', 0)}", style="green")
        text.append(f" -{f.get('removed', 0)}  ", style="red")
        text.append(visible(str(f.get("path"))))
        if f.get("old_path"):
            text.append(f"  (was {visible(str(f['old_path']))})", style="dim")
        text.append("\n")
    return text


def gate_changes_text(changes: dict[str, Any], out: Text) -> Text:
    """A gate's call's change, under the evidence: the files, then each file's diff."""
    files = changes.get("files") or []
    out.append(f"\nthe change this call would make: {len(files)} file{'' if len(files) == 1 else 's'}, "
               f"+{changes.get('added', 0)} -{changes.get('removed', 0)}"
               + (" (cut short)" if changes.get("truncated") else "") + "\n", style="bold")
    files_text(files, out)
    for f in files:
        patch = f.get("patch")
        diff_lines(patch if isinstance(patch, list) else str(patch or "").splitlines(), out)
    return out


def summary_line(diff: dict[str, Any]) -> Text:
    """Where the diff comes from and its totals."""
    files = diff.get("files") or []
    text = Text()
    source = diff.get("source")
    if source == "worktree":
        text.append(f"worktree {visible(str(diff.get('worktree')))}  branch {visible(str(diff.get('branch')))}  "
                    f"from {visible(str(diff.get('base') or '')[:12])}\n", style="bold")
    elif source == "calls":
        text.append("from the session's calls (no worktree): each edit's lines are numbered within the edit\n",
                    style="bold")
    else:
        text.append("no change seen yet: no worktree, and no call that changed a file\n", style="bold")
    text.append(f"{len(files)} file{'' if len(files) == 1 else 's'} changed, ")
    text.append(f"+{diff.get('added', 0)}", style="green")
    text.append(" ")
    text.append(f"-{diff.get('removed', 0)}", style="red")
    if diff.get("truncated"):
        text.append("  (cut short: the rest is not shown)", style="yellow")
    text.append("\n")
    return text


def _trimmed(text: Text) -> Text:
    """`text` without its last line break (a Static would show it as an empty line)."""
    text.rstrip()
    return text


class SessionDiff(Screen[None]):
    """One session's changes so far: files with +/- counts and the unified diff, read again while shown."""

    HELP_TITLE = "Session diff"
    CSS = """
    SessionDiff #diff-files { height: auto; max-height: 35%; border: round $primary 50%; }
    SessionDiff #diff-box { height: 1fr; border: round $primary 50%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,v", "app.pop_screen", "Back", id="diff.back"),
        Binding("j", "scroll(True)", "Scroll down", id="diff.down", show=False),
        Binding("k", "scroll(False)", "Scroll up", id="diff.up", show=False),
    ]

    class Loaded(Message):
        def __init__(self, diff: dict[str, Any] | None, error: str | None = None) -> None:
            super().__init__()
            self.diff = diff
            self.error = error

    def __init__(self, paths: Paths, session_id: str, key: str | None = None, *, poll: float = POLL_SECONDS,
                 fixed: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.paths = paths
        self.session_id = session_id  # its id on its daemon (`paths`)
        self.session_key = key or session_id
        self.poll = poll
        self.fixed = fixed  # a diff to show with no daemon (snapshots)
        self.diff: dict[str, Any] | None = None
        self._shown: tuple[Any, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="diff-files"):
            yield Static("reading the diff…", id="diff-summary")
        with VerticalScroll(id="diff-box"):
            yield Static("", id="diff-patch")
        yield KeyBar()

    def on_mount(self) -> None:
        self.title = f"{self.session_key} diff"
        self.query_one("#diff-files").border_title = "files changed"
        self.query_one("#diff-box").border_title = "diff"
        if self.fixed is not None:
            self.show(self.fixed)
            return
        self.load()
        self.set_interval(self.poll, self._tick)

    def _tick(self) -> None:
        if self.is_current:  # only while shown: a diff under a dialog or behind another screen waits
            self.load()

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def load(self) -> None:
        try:
            diff = request(self.paths, "diff", multiline=True, session=self.session_id)
        except (DaemonError, OSError) as exc:
            self.post_message(self.Loaded(None, visible(str(exc))))
            return
        self.post_message(self.Loaded(diff if isinstance(diff, dict) else None))

    def on_session_diff_loaded(self, message: Loaded) -> None:
        if message.error is not None:
            self.query_one("#diff-summary", Static).update(Text(f"the diff cannot be read: {message.error}",
                                                                style="bold red"))
            return
        if message.diff is not None:
            self.show(message.diff)

    def show(self, diff: dict[str, Any]) -> None:
        """Draw `diff` (made visible already) when it differs from what is shown."""
        key = (diff.get("source"), diff.get("added"), diff.get("removed"), len(diff.get("patch") or ""),
               len(diff.get("files") or []))
        self.diff = diff
        if key == self._shown:
            return
        self._shown = key
        files = diff.get("files") or []
        self.query_one("#diff-summary", Static).update(_trimmed(files_text(files, summary_line(diff))))
        patch = str(diff.get("patch") or "")
        self.query_one("#diff-patch", Static).update(_trimmed(diff_lines(patch.splitlines())))

    def action_scroll(self, down: bool) -> None:
        box = self.query_one("#diff-box", VerticalScroll)
        box.scroll_relative(y=3 if down else -3, animate=False)
