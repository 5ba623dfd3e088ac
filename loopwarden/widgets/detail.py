"""One session up close: its event stream (history, then live), health, processes, event rate and spills."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from itertools import islice
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Header, OptionList, RichLog, Sparkline
from textual.widgets.option_list import Option

from ..runtime.client import DaemonError
from ..paths import Paths
from ..supervisor.verdicts import FINAL_STATES
from ..supervisor.visible import visible, visible_tree
from .copying import copy_out
from .feed import Feed, request
from .health import HealthPanel
from .keybar import KeyBar
from .proctree import ProcessTree
from .search import Search
from .search_bar import SEARCH_KEYS, SearchableScreen, SearchBar, scroll_to_match
from .spill_viewer import SpillViewer
from .stream import copy_target, history_messages, is_stderr, message_key, render

HISTORY = 500  # newest events read from the store when the screen opens
MAX_LINES = 1_000  # lines kept in the stream (the store has the rest); redrawn whole when `l` toggles
DRAW_SECONDS = 0.2
RESYNC_SECONDS = 1.0
DRAW_LINES = 250  # drawn per tick at most: ~20 ms of rendering, 1,250 lines a second
PROCESS_SECONDS = 2.0
SPILLS_KEPT = 100
RATE_SAMPLES = 60

SnapshotOf = Callable[[str], "dict[str, Any] | None"]  # the app's latest snapshot of a session
Line = tuple[Text, bool, "dict[str, Any] | None"]  # a drawn line, whether it is an agent's stderr, its record


class SessionDetail(SearchableScreen, Screen[None]):
    """The live stream of one session with its health, process tree, event-rate sparkline and spill files.

    `history`, `processes` and `live=False` make a screen of fixed data with no daemon at all (for snapshots).
    """

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012 - Textual types it so
    CSS = """
    SessionDetail #body { layout: horizontal; height: 1fr; }
    SessionDetail #stream { width: 1fr; height: 1fr; border: round $primary 50%; }
    SessionDetail #side { width: 56; height: 1fr; }
    SessionDetail #health-box { height: auto; max-height: 70%; border: round $primary 50%; }
    SessionDetail #side-right { height: 1fr; }
    SessionDetail .section { border: none; border-top: solid $primary 50%; border-title-color: $text-muted; }
    SessionDetail #rate { height: 3; min-height: 3; padding: 0 1; }
    SessionDetail #procs { height: 1fr; min-height: 3; }
    SessionDetail #spills { height: auto; max-height: 6; }
    SessionDetail.-narrow #body { layout: vertical; }
    SessionDetail.-narrow #side { width: 1fr; height: 45%; layout: horizontal; }
    SessionDetail.-narrow #health-box { width: 1fr; height: 1fr; max-height: 100%; }
    SessionDetail.-narrow #side-right { width: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        *SEARCH_KEYS,
        Binding("y", "copy", "Copy", id="detail.copy"),
        Binding("escape", "back", "Back", id="detail.back"),
        Binding("o", "open_spill", "Open spill", id="detail.open_spill"),
        Binding("f", "toggle_follow", "Follow", id="detail.follow"),
        Binding("l", "toggle_logs", "Stderr", id="detail.logs"),
        Binding("j", "scroll_stream(True)", "Scroll down", id="detail.down", show=False),
        Binding("k", "scroll_stream(False)", "Scroll up", id="detail.up", show=False),
    ]

    class HistoryLoaded(Message):
        def __init__(self, messages: list[dict[str, Any]], error: str | None = None, generation: int = 0) -> None:
            super().__init__()
            self.messages = messages
            self.error = error
            self.generation = generation  # the feed's subscription the history was read after

    class ProcessesLoaded(Message):
        def __init__(self, rows: list[dict[str, Any]], error: str | None = None) -> None:
            super().__init__()
            self.rows = rows
            self.error = error

    def __init__(self, paths: Paths, session_id: str, *, snapshot_of: SnapshotOf | None = None,
                 history: dict[str, Any] | None = None, processes: list[dict[str, Any]] | None = None,
                 live: bool = True, clock: Callable[[], float] = time.time, key: str | None = None) -> None:
        super().__init__()
        self.paths = paths
        self.session_id = session_id  # its id on its daemon (`paths`)
        self.session_key = key or session_id  # the console's key for it: box:s3 for a session of host box
        self.snapshot_of = snapshot_of
        self.clock = clock
        self.feed = (Feed(paths, sessions=[session_id], events=True, autostart=False, multiline=True)
                     if live else None)
        self.history_done = False
        self.show_logs = False  # the agent's stderr is noise next to what it did; `l` shows it
        self.stderr_lines = 0  # received into the stream, shown or not
        self.spills: dict[int, str] = {}  # id -> path, newest last, capped
        self._fixed_history = visible_tree(history, multiline=True)
        self._fixed_processes = visible_tree(processes)
        self._lines: deque[Line] = deque(maxlen=MAX_LINES)
        self.search = Search()
        self._seen: set[tuple[Any, ...]] = set()  # history records, so the live overlap is skipped
        self._snapshot: dict[str, Any] | None = None
        self._rate: deque[int] = deque([0] * RATE_SAMPLES, maxlen=RATE_SAMPLES)
        self._next_spill = 1
        self._drawn: tuple[int, int] | None = None
        self._processes_done = False
        self._loaded_at = 0.0
        self.skipped = 0  # updates the daemon dropped since the stream was last read from the store
        self._feed_error: str | None = None  # the feed's trouble shown under the stream
        self._history_generation = 0  # the feed's subscription the shown history was read after
        self._reconnected = False  # the next history read redraws the stream: the gap is only in the store

    # ---- layout -------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Container(id="body"):
            yield RichLog(id="stream", max_lines=MAX_LINES, wrap=False, markup=False, auto_scroll=True)
            with Container(id="side"):
                with VerticalScroll(id="health-box"):
                    yield HealthPanel(id="health")
                with Vertical(id="side-right"):
                    yield Sparkline([], id="rate", classes="section")
                    yield ProcessTree(id="procs", classes="section")
                    yield OptionList(id="spills", classes="section")
        yield SearchBar()
        yield KeyBar()

    def on_mount(self) -> None:
        self.title = f"{self.session_key}"
        stream = self.query_one("#stream", RichLog)
        stream.border_title = "events"
        self.query_one("#health-box").border_title = "health"
        self.query_one("#rate").border_title = "event rate"
        self.query_one("#procs").border_title = "processes"
        self.query_one("#spills").display = False
        stream.anchor(stream.auto_scroll)  # kept at the bottom by the layout itself, even before the first one
        self._follow_subtitle()
        stream.focus()
        if self.feed is None:
            self._show_history(history_messages(self._fixed_history or {}, HISTORY))
            self.query_one(ProcessTree).show(self._fixed_processes or [])
        else:
            self.feed.start()
            self.load_history()
            self.poll_processes()
            self.set_interval(PROCESS_SECONDS, self.poll_processes)
        self.draw()
        self.set_interval(DRAW_SECONDS, self.draw)

    def on_unmount(self) -> None:
        if self.feed is not None:
            self.feed.close()

    # ---- workers: they read from the daemon and post messages ---------------
    def _request(self, op: str, *, multiline: bool = False, **fields: Any) -> Any:
        return request(self.paths, op, multiline=multiline, **fields)

    @work(thread=True, exit_on_error=False, exclusive=True, group="history")
    def load_history(self) -> None:
        """After the live subscription is in place (so nothing falls between), read the newest events."""
        assert self.feed is not None
        self.feed.wait_ready()
        generation = self.feed.generation
        try:
            logs = self._request("logs", multiline=True, session=self.session_id, tail=True, limit=HISTORY)
        except (DaemonError, OSError) as exc:
            self.post_message(self.HistoryLoaded([], f"cannot read the history: {visible(str(exc))}", generation))
            return
        self.post_message(self.HistoryLoaded(history_messages(logs, HISTORY), generation=generation))

    def poll_processes(self) -> None:
        """Ask for the process tree, until it has come back empty for an ended session."""
        if not self._processes_done:
            self.fetch_processes()

    @work(thread=True, exit_on_error=False, exclusive=True, group="processes")
    def fetch_processes(self) -> None:
        try:
            rows = self._request("processes", session=self.session_id)
        except (DaemonError, OSError) as exc:
            self.post_message(self.ProcessesLoaded([], visible(str(exc))))
            return
        self.post_message(self.ProcessesLoaded(rows or []))

    # ---- handlers: the only code that touches widgets ------------------------
    def on_session_detail_history_loaded(self, message: HistoryLoaded) -> None:
        self._history_generation = message.generation
        if message.error:
            self._reconnected = False  # keep what is shown: the store could not be read to replace it
            self._write([(Text(message.error, style="red"), False, None)])
        self._show_history(message.messages)

    def on_session_detail_processes_loaded(self, message: ProcessesLoaded) -> None:
        tree = self.query_one(ProcessTree)
        tree.border_subtitle = Content(message.error or "")  # a border title is markup unless Content
        if not message.error:
            tree.show(message.rows)
            state = (self.snapshot() or {}).get("state")
            self._processes_done = not message.rows and state in FINAL_STATES

    def _show_history(self, messages: list[dict[str, Any]]) -> None:
        if self.skipped or self._reconnected:
            self.query_one("#stream", RichLog).clear()
            self._lines.clear()
            self.stderr_lines = 0
            why = (f"{self.skipped:,} updates came too fast for this screen" if self.skipped
                   else "reconnected to the daemon")
            self._write([(Text(f"… {why}; the newest {HISTORY} from the store:", style="dim italic"), False, None)])
            self.skipped, self._reconnected = 0, False
        self._seen = {message_key(m) for m in messages}
        self._write(self._render_all(messages, HISTORY))
        self.history_done = True
        self._loaded_at = time.monotonic()

    def snapshot(self) -> dict[str, Any] | None:
        """The newest snapshot: the app's (`snapshot_of`), else the one this screen's feed last received."""
        snap = self.snapshot_of(self.session_key) if self.snapshot_of else None
        return snap or self._snapshot

    def draw(self) -> None:
        """Apply what the feed buffered since the last tick: one write to the stream, one health update."""
        if self.feed is not None:
            first = self.feed.take_sessions()
            if first:
                self._snapshot = first[-1]
            if self.history_done and self.feed.generation != self._history_generation:
                self._reread()  # a new subscription: what happened in the gap is only in the store
            if self.history_done:  # until then the feed keeps buffering, so the order stays right
                fresh = [m for m in self.feed.drain() if self._fresh(m)]
                self._rate.append(sum(1 for m in fresh if m.get("kind") == "event"))
                self.skipped += sum(m.get("count") or 0 for m in fresh if m.get("kind") == "skipped")
                if self.skipped:  # the daemon dropped some of ours: redraw the newest from the store
                    self._resync()
                else:
                    self._write(self._render_all(fresh, DRAW_LINES))
            if self.feed.error != self._feed_error:  # lost, or back: the feed reconnects by itself
                self._feed_error = self.feed.error
                if self._feed_error:
                    self.query_one("#stream", RichLog).border_subtitle = Content(self._feed_error)
                else:
                    self._follow_subtitle()
        snap = self.snapshot()
        now = self.clock()
        drawn = (id(snap), int(now))
        if drawn != self._drawn:  # a new snapshot, or a second passed (the runtime moves)
            self._drawn = drawn
            self.query_one(HealthPanel).show(snap, now)
            if snap:
                self.title = visible(f"{self.session_key} {snap.get('name') or ''}".strip())  # its feed keeps \n
                self.sub_title = str(snap.get("state") or "")
        rate = [float(n) for n in (snap or {}).get("rate") or []]
        sparkline = self.query_one("#rate", Sparkline)
        data = rate if any(rate) else [float(n) for n in self._rate]
        if list(sparkline.data or []) != data:
            sparkline.data = data

    def _resync(self) -> None:
        """Read the newest records again, at most once a second; what arrives meanwhile is in that read."""
        if time.monotonic() - self._loaded_at >= RESYNC_SECONDS:
            self.history_done = False
            self.load_history()

    def _reread(self) -> None:
        """Read the history again after the feed subscribed anew, redrawing the stream with it."""
        self._reconnected = self._history_generation > 0  # a first subscription after a failed read: no note
        self.history_done = False
        self.load_history()

    def _fresh(self, message: dict[str, Any]) -> bool:
        if message.get("kind") == "session":
            data = message.get("data") or {}
            if data.get("id") == self.session_id:
                self._snapshot = data
            return False
        return message_key(message) not in self._seen

    def _render_all(self, messages: list[dict[str, Any]], limit: int) -> list[Line]:
        """Lines for the newest `limit` messages (a person cannot read more per tick); every spill is kept."""
        out: list[Line] = []
        first = len(messages) - limit
        if first > 0:
            out.append((Text(f"… {first:,} records not drawn (too fast to read here; the store has them)",
                             style="dim italic"), False, None))
        for index, message in enumerate(messages):
            spill_id = self._add_spill(message) if message.get("kind") == "spill" else None
            line = render(message, spill_id) if index >= first else None
            if line is not None:
                out.append((line, is_stderr(message), message))
        return out

    def _write(self, items: list[Line]) -> None:
        """One write of many lines (never a widget or a write per event); a search redraws with its matches."""
        if not items:
            return
        gone = max(0, len(self._lines) + len(items) - MAX_LINES)  # the oldest kept lines this write pushes out
        dropped = sum(1 for _, is_log, _ in islice(self._lines, gone) if self.show_logs or not is_log)
        self._lines.extend(items)
        stderr = sum(1 for _, is_log, _ in items if is_log)
        if stderr:
            self.stderr_lines += stderr
            self._follow_subtitle()
        if self.search.active:
            self._searched_again(dropped)
            return
        shown = [line for line, is_log, _ in items if self.show_logs or not is_log]
        if shown:
            self.query_one("#stream", RichLog).write(Text("\n").join(shown))

    def _searched_again(self, dropped: int) -> None:
        """New lines under a search: counted and highlighted, the view kept on the text it showed (never moved
        to the match, which `n` does)."""
        stream = self.query_one("#stream", RichLog)
        top = stream.scroll_offset.y - dropped
        self.search.refresh(self.search_lines(), dropped)
        self.search_bar.show_count(self.search.count_text())
        self._redraw()
        if not stream.auto_scroll:
            stream.scroll_to(y=max(0, top), animate=False, immediate=True)

    def _shown(self) -> list[Line]:
        return [item for item in self._lines if self.show_logs or not item[1]]

    def _redraw(self) -> None:
        """The kept lines drawn again in one write, the search's matches highlighted."""
        stream = self.query_one("#stream", RichLog)
        stream.clear()
        shown = [self.search.highlight(line, number) for number, (line, _, _) in enumerate(self._shown())]
        if shown:
            stream.write(Text("\n").join(shown))

    def _add_spill(self, message: dict[str, Any]) -> int | None:
        path = (message.get("data") or {}).get("path")
        if not path:
            return None
        if str(path) in self.spills.values():  # read again after a resync
            return next(k for k, v in self.spills.items() if v == str(path))
        spill_id, self._next_spill = self._next_spill, self._next_spill + 1
        self.spills[spill_id] = str(path)
        options = self.query_one("#spills", OptionList)
        if len(self.spills) > SPILLS_KEPT:
            del self.spills[next(iter(self.spills))]
            options.remove_option_at_index(0)
        options.add_option(Option(Text(str(path).rsplit("/", 1)[-1]), id=str(spill_id)))
        options.highlighted = options.option_count - 1
        options.border_title = f"spills ({len(self.spills)}): o opens"
        options.display = True
        return spill_id

    def _follow_subtitle(self) -> None:
        """Under the stream: following or paused, and the stderr lines hidden (or shown)."""
        stream = self.query_one("#stream", RichLog)
        follow = "following (f stops)" if stream.auto_scroll else "paused (f follows)"
        n = self.stderr_lines
        lines = f"{n:,} stderr line{'' if n == 1 else 's'}"
        stderr = "" if not n else f" · {lines} shown (l hides)" if self.show_logs else f" · {lines} hidden (l shows)"
        stream.border_subtitle = follow + stderr

    # ---- actions ------------------------------------------------------------
    def action_back(self) -> None:
        self.dismiss(None)

    def action_toggle_follow(self) -> None:
        stream = self.query_one("#stream", RichLog)
        stream.auto_scroll = not stream.auto_scroll
        stream.anchor(stream.auto_scroll)
        self._follow_subtitle()

    def action_toggle_logs(self) -> None:
        """Show or hide the agent's stderr lines, redrawing the kept lines in one write."""
        self.show_logs = not self.show_logs
        if self.search.active:
            self.search.refresh(self.search_lines())
            self.search_bar.show_count(self.search.count_text())
        self._redraw()
        self._follow_subtitle()

    def action_scroll_stream(self, down: bool) -> None:
        """j and k: the stream one line down or up, as the arrow keys scroll it."""
        stream = self.query_one("#stream", RichLog)
        if down:
            stream.action_scroll_down()
        else:
            stream.action_scroll_up()

    def action_open_spill(self, spill_id: int | None = None) -> None:
        """Open a spill file: the one clicked, else the one highlighted in the list, else the newest."""
        if spill_id is None:
            options = self.query_one("#spills", OptionList)
            index = options.highlighted
            if index is not None and options.option_count:
                spill_id = int(options.get_option_at_index(index).id or 0)
            elif self.spills:
                spill_id = next(reversed(self.spills))
        path = self.spills.get(spill_id or 0)
        if path is None:
            self.notify("no spilled output in this session", severity="warning")
            return
        self.app.push_screen(SpillViewer(path, self.paths))

    @on(OptionList.OptionSelected, "#spills")
    def spill_chosen(self, event: OptionList.OptionSelected) -> None:
        self.action_open_spill(int(event.option.id or 0))

    def action_copy(self) -> None:
        """Copy the record at the current match (else the newest shown): a call, its output, a message."""
        shown = self._shown()
        found = self.search.match
        picked = shown[found.line] if found is not None and found.line < len(shown) else \
            next((item for item in reversed(shown) if item[2] is not None), None)
        if picked is None or picked[2] is None:
            self.notify("nothing to copy here yet", severity="warning")
            return
        copy_out(self.app, copy_target(picked[2]), self.paths)

    # ---- search: over the stream's lines as shown ---------------------------
    def search_lines(self) -> list[str]:
        return [line.plain for line, _, _ in self._shown()]

    def search_view(self) -> Widget:
        return self.query_one("#stream", RichLog)

    def search_top(self) -> int:
        return int(self.query_one("#stream", RichLog).scroll_offset.y)

    def show_search(self) -> None:
        """Draw the matches; a match found stops following, so the stream stays where the match is."""
        stream = self.query_one("#stream", RichLog)
        found = self.search.match
        if found is not None and stream.auto_scroll:
            self.action_toggle_follow()
        self._redraw()
        if found is not None:
            scroll_to_match(stream, found)
