"""The operator console: every session at a glance, live from the daemon, acted on from the keyboard."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, cast

from textual import events, on, work
from textual._styles_cache import StylesCache
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.command import Provider
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from ..runtime.client import DaemonError
from ..paths import Paths
from ..supervisor.verdicts import FINAL_STATES
from ..supervisor.visible import visible
from .bulk import BulkActions
from .detail import SessionDetail
from .feed import Feed
from .grouping import next_group
from .diffs import SessionDiff
from .gates import GatesQueue
from .help import Help, key_names
from .hosts_feed import HostsFeed
from .keybar import KeyBar
from .palette import ConsoleCommands
from .session_actions import NEEDS, SessionActions
from .status_line import status_line
from .session_table import SORTS, SessionTable, needs_human, session_number
from .saved_view import ViewKeeper, restore
from .typeahead import TypeAhead
from .user_settings import apply_user_settings, rebound

DRAW_SECONDS = 0.25  # live data is drawn on a timer, a few times a second, never per event
PRUNE_SECONDS = 2.0
GATES_AGAIN_SECONDS = 2.0  # the gates read again while one's held call (and so its change) is not known yet

SESSIONS_ONLY = {"filter", "sort", "reverse_sort", "hide_ended", "open_detail", "group"}
MUTATING = {"approve", "approve_with_guidance", "deny", "grant", "reset", "inject", "pause", "resume", "kill",
            "launch", "limits", "rewind", "restart", "continue_session", "takeover"}

SESSION_KEYS = [
    Binding("enter", "open_detail", "Open", id="open", show=False),
    Binding("g", "gates", "Gates", id="gates"),
    Binding("v", "diff", "Diff", id="diff"),
    Binding("slash", "filter", "Filter", id="filter"),
    Binding("s", "sort", "Sort", id="sort"),
    Binding("S", "reverse_sort", "Reverse sort", id="reverse_sort", show=False),
    Binding("h", "hide_ended", "Hide ended", id="hide_ended", show=False),
    Binding("G", "group", "Group by project, host, agent, state, tag, none", id="group", show=False),
]
ACTION_KEYS = [
    Binding("a", "approve", "Approve", id="approve"),
    Binding("w", "approve_with_guidance", "Approve+guidance", id="guidance", show=False),
    Binding("d", "deny", "Deny", id="deny", show=False),
    Binding("u", "grant", "Grant authority", id="grant", show=False),
    Binding("x", "reset", "Reset counters", id="reset", show=False),
    Binding("i", "inject", "Inject", id="inject", show=False),
    Binding("p", "pause", "Pause", id="pause", show=False),
    Binding("r", "resume", "Resume", id="resume", show=False),
    Binding("b", "rewind", "Rewind", id="rewind", show=False),
    Binding("R", "restart", "Restart", id="restart", show=False),
    Binding("c", "continue_session", "Continue", id="continue", show=False),
    Binding("T", "takeover", "Take over", id="takeover", show=False),
    Binding("ctrl+k,K", "kill", "Kill", id="kill"),  # k moves the cursor, as in k9s, lazygit and htop
    Binding("L", "limits", "Limits", id="limits", show=False),
    Binding("n", "launch", "New", id="launch"),
]
ACTION_ACTIONS = frozenset(b.action for b in ACTION_KEYS)
GENERAL_KEYS = [
    Binding("question_mark", "help", "Help", id="help"),
    Binding("q", "quit", "Quit", id="quit"),
]


class FilterBox(Input):
    """The filter line: typing filters live, enter keeps the filter, escape clears it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear", "Clear filter")]

    def action_clear(self) -> None:
        self.value = ""
        self.display = False
        self.screen.query_one(SessionTable).focus()


class Sessions(TypeAhead, Screen[None]):
    """The main screen: the sessions table, a filter line and a status line."""

    LINE_ACTION = "filter"  # the keys typed right after `/` go into the filter, never to the bindings

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "Unmark, else clear the filter", id="clear_filter", show=False)]

    def action_clear_filter(self) -> None:
        """Escape unmarks the marked rows first, then clears the filter from the table too."""
        if self.query_one(SessionTable).clear_marks():
            return
        box = self.query_one(FilterBox)
        if box.value or box.display:
            box.action_clear()

    def on_mount(self) -> None:
        """The view the operator left (group, sort, filter, hide-ended), from the saved view file."""
        keeper = getattr(self.app, "views", None)
        if keeper is not None:
            restore(keeper, self.query_one(SessionTable), self.query_one(FilterBox), self.app.notify)

    def compose(self) -> ComposeResult:
        yield Header()
        hosts = getattr(getattr(self.app, "feed", None), "hosts", ())
        yield SessionTable(id="sessions", hosts=len(hosts) > 1)  # the HOST column, with more than one host
        yield FilterBox(placeholder="filter: words to match, ! for sessions that need a human", id="filter")
        yield Static("connecting to the daemon…", id="status")
        yield KeyBar()


class ConsoleApp(SessionActions, App[None]):
    """k9s for agents: a live table of sessions, a gates queue, single-key actions, confirmation on destructive keys."""

    TITLE = "loopwarden"
    CSS_PATH = str(Path(__file__).with_name("console.tcss"))  # absolute: subclasses live elsewhere
    BINDINGS: ClassVar[list[BindingType]] = [*SESSION_KEYS, *ACTION_KEYS, *GENERAL_KEYS]
    # one provider, so the console's commands come first and in order (Textual's own follow them)
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {ConsoleCommands}

    def __init__(self, paths: Paths, *, read_only: bool = False, autostart: bool = True,
                 title: str | None = None, feed: Feed | HostsFeed | None = None,
                 clock: Callable[[], float] = time.time, client: str = "console") -> None:
        super().__init__()
        self.paths = paths
        self.read_only = read_only
        # `client`: the kind the audit log names this console's actions by ("web" when served to a browser)
        self.feed: Feed | HostsFeed = feed if feed is not None else Feed(paths, autostart=autostart, client=client)
        self.clock = clock
        self.snapshots: dict[str, dict[str, Any]] = {}
        self.gates: list[dict[str, Any]] = []
        self._gate_refs: frozenset[str] | None = None
        self._known_gates: set[str] = set()
        self._can: tuple[str | None, tuple[str, ...] | None, bool] = (None, None, False)
        self._linked: bool | None = None  # connected at the last draw (None before the first)
        self.keymap: dict[str, str] = {}  # the keys the user config rebinds (binding id -> keys)
        self.bulk = BulkActions(self)  # a key on marked rows acts on them all
        self.views = ViewKeeper(paths.console_view, writes=not read_only) if isinstance(paths, Paths) else None
        if title:
            self.sub_title = title

    def get_default_screen(self) -> Screen[Any]:
        return Sessions()

    def on_mount(self) -> None:
        if self.user_config is not None:
            self.keymap = apply_user_settings(self, self.user_config).keymap
        self.install_screen(GatesQueue(lambda: self.gates, self.clock), name="gates")  # one, reused: see below
        self.feed.start()
        self.set_interval(DRAW_SECONDS, self.draw)
        self.set_interval(PRUNE_SECONDS, self.prune_dead_widgets)

    def prune_dead_widgets(self) -> None:
        """Let go of what Textual 8.2.8 keeps after it is gone (tests/console/test_memory.py).

        * A method cache keyed by the style cache of each widget drawn (an lru_cache of 1,024)
          kept every toast, dialog and detail view's rendered lines for the next 1,024 widgets.
          It is emptied; it refills in a frame.
        * A toast whose notification expired before its own timer fired (a busy console) is
          removed without its holder, and the empty holders stayed in the rack for good.
        """
        StylesCache.get_inner_outer.cache_clear()
        screens = set(self.screen_stack)
        gates = self._installed_screens.get("gates")  # gone once the app starts closing
        if isinstance(gates, Screen):
            screens.add(gates)
        for screen in screens:
            for holder in screen.query("ToastRack > ToastHolder"):
                if holder.is_mounted and not holder.children and not holder._closing:
                    holder.remove()

    def on_unmount(self) -> None:
        self.feed.close()

    @property
    def user_config(self) -> Path | None:
        """The profile's config file, which holds the user's console settings (none for a console on no profile)."""
        return self.paths.config_file if isinstance(self.paths, Paths) else None

    @property
    def main(self) -> Screen[Any]:
        return self.screen_stack[0]

    @property
    def table(self) -> SessionTable:
        return self.main.query_one(SessionTable)

    # ---- live data ----------------------------------------------------------
    def draw(self) -> None:
        """Apply what the feed buffered since the last tick, in one batch, by row key."""
        if not (self.feed.ready and self.screen_stack and self.main.query(SessionTable)):  # not composed, or closing
            return
        changed: set[str] = set()
        fresh = self.feed.take_sessions()
        if fresh is not None:  # a first snapshot: at start, or from the daemon reached again
            changed |= set(self.snapshots)  # sessions a restarted daemon no longer knows leave the table
            self.snapshots.clear()  # in place: open details read it through `snapshots.get`
            self.snapshots.update((snap["id"], snap) for snap in fresh)
            changed |= set(self.snapshots)
            self._known_gates = set(self._pending_refs())  # gates already open are in the status line, not toasts
            self._gate_refs = None  # read the gates again: a new daemon numbers its own
        for message in self.feed.drain():
            data = message.get("data") or {}
            if message.get("kind") == "session" and data.get("id"):
                self.snapshots[data["id"]] = data
                changed.add(data["id"])
        changed |= {sid for sid, snap in self.snapshots.items() if snap.get("state") not in FINAL_STATES}
        with self.batch_update():
            self.table.show(self.snapshots, changed)
            self._status()
        problem = self.views.keep(self.table) if self.views is not None else None
        if problem:
            self.notify(problem, severity="warning", markup=False)
        can = self._selection_can()
        if can != self._can:  # the keys a session cannot use are greyed out
            self._can = can
            self.refresh_bindings()
        if self.feed.connected != self._linked:
            self._connection_changed()
        if isinstance(self.feed, HostsFeed):  # several hosts: one going or coming back is said once
            for note, severity in self.feed.take_notices():
                self.notify(note, severity=severity, timeout=4, markup=False)
        refs = self._pending_refs()
        if refs != self._gate_refs:
            self._gate_refs = refs
            self.load_gates()

    def _connection_changed(self) -> None:
        """The link went or came back; a return is said once in a toast (the status line says the rest)."""
        was, self._linked = self._linked, self.feed.connected
        if was is False and self._linked:
            self.notify("reconnected to the daemon: sessions and gates are current", timeout=4)

    def _selection_can(self) -> tuple[str | None, tuple[str, ...] | None, bool]:
        snap = self.target()
        caps = (snap or {}).get("capabilities")
        return (snap or {}).get("id"), tuple(caps) if isinstance(caps, list) else None, self.bulk.marked_here()

    def _pending_refs(self) -> frozenset[str]:
        return frozenset(f"{sid}:{g}" for sid, s in self.snapshots.items() if needs_human(s)
                         for g in s.get("pending_gates") or [])

    def _status(self) -> None:
        """Draw the line under the table again."""
        found = self.main.query("#status")
        if found:  # else the screen is still being composed, or already closing: the next draw says it
            found.first(Static).update(status_line(self.snapshots, self.table, self.feed, self.read_only))

    @work(thread=True, exclusive=True, group="gates", exit_on_error=False)
    def load_gates(self) -> None:
        """Read the pending gates with their evidence (the snapshots carry only their ids)."""
        try:
            gates = self.feed.request("gates")
        except (DaemonError, OSError):
            return
        self.call_from_thread(self._gates_loaded, gates)

    def _gates_loaded(self, gates: list[dict[str, Any]]) -> None:
        self.gates = gates
        refs = {g["ref"] for g in gates}
        for gate in gates:
            if gate["ref"] not in self._known_gates:
                reason = str(gate.get("reason") or "")
                reason = reason if len(reason) <= 120 else reason[:119] + "…"
                self.notify(f"{gate.get('name')}: {reason} (g to decide)", title=f"gate {gate['ref']} opened",
                            severity="warning", timeout=8, markup=False)  # agent text is never markup
                self.bell()
        self._known_gates |= refs
        # read again: a gate whose held call has not come yet, or one a snapshot names that the daemon does not list
        # yet (the first snapshot holds the stored rows of sessions a restarted daemon is still taking up)
        if any("changes" not in gate for gate in gates) or (self._gate_refs or frozenset()) - refs:
            self.set_timer(GATES_AGAIN_SECONDS, self.load_gates)

    # ---- what an action applies to -----------------------------------------
    def target(self) -> dict[str, Any] | None:
        """The session an action applies to: the gate's, the detail's, or the table's selection."""
        screen = self.screen
        if isinstance(screen, GatesQueue):
            gate = screen.selected()
            return self.snapshots.get(gate["session"]) if gate else None
        sid = getattr(screen, "session_key", None) or self.table.selected_id()
        return self.snapshots.get(sid) if sid else None

    def target_gate(self) -> str | None:
        if isinstance(self.screen, GatesQueue):
            gate = self.screen.selected()
            return gate["ref"] if gate else None
        snap = self.target()
        pending = (snap or {}).get("pending_gates") or []
        return f"{snap['id']}:{pending[0]}" if snap and pending and needs_human(snap) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not getattr(self.screen, "ACTS_ON_SESSIONS", True) and action in ACTION_ACTIONS:
            return False  # a view of text only (the spill viewer): its keys never act on the session behind it
        if action in SESSIONS_ONLY:
            return isinstance(self.screen, Sessions)
        if self.read_only and action in MUTATING:
            return False  # a read-only console shows no action keys (footer, help, palette)
        if action in NEEDS and not self.bulk.covers(action) and self._incapable(self.target(), action):
            return None  # shown greyed out: the selected session cannot do it (with rows marked, each is asked)
        return True

    def on_key(self, event: events.Key) -> None:
        """A greyed-out key says why instead of doing nothing (Textual does not run a disabled binding)."""
        action = next((b.action for b in ACTION_KEYS
                       if isinstance(b, Binding) and event.key in (k.strip() for k in b.key.split(","))), None)
        if action is None or isinstance(self.focused, Input) or not self.screen.is_current:
            return
        if self.read_only:
            self._allowed(action)
        elif action in NEEDS and not self.bulk.covers(action):
            self._capable(self.target(), action)

    # ---- views ----------------------------------------------------------------
    @on(SessionTable.RowSelected, "#sessions")
    def action_open_detail(self) -> None:
        sid = self.table.selected_id()
        if sid is None:
            return
        self._open_detail(sid)

    def on_gates_queue_open_session(self, message: GatesQueue.OpenSession) -> None:
        self._open_detail(message.session_id)

    def _open_detail(self, key: str) -> None:
        """The detail of the session `key` names, read from its own host's daemon (box:s3: box's s3)."""
        found = self._daemon_of(key)
        if found is not None:
            self.push_screen(SessionDetail(*found, key=key, snapshot_of=self.snapshots.get))

    def action_diff(self) -> None:
        """The diff of the selected session (the gate's, the detail's): what it changed so far."""
        screen = self.screen
        if isinstance(screen, GatesQueue):
            gate = screen.selected()
            key = str(gate["session"]) if gate else None
        else:
            key = getattr(screen, "session_key", None) or self.table.selected_id()
        found = self._daemon_of(key) if key and not isinstance(screen, SessionDiff) else None
        if found is not None:
            self.push_screen(SessionDiff(*found, key=key))

    def _daemon_of(self, key: str) -> tuple[Paths, str] | None:
        """The daemon and id of the session `key` names (box:s3: box's s3); None, said, when there is none."""
        where = getattr(self.feed, "where", None)  # several hosts: the key says which daemon
        if where is None:
            return self.paths, key
        try:
            paths, sid = where(key)
        except DaemonError as exc:
            self.notify(visible(str(exc)), severity="error", markup=False)
            return None
        return paths, sid

    def action_gates(self) -> None:
        if not isinstance(self.screen, GatesQueue):
            self.push_screen("gates")

    def action_filter(self) -> None:
        box = self.main.query_one("#filter", Input)
        box.display = True
        cast(Sessions, self.main).type_into(box)

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.table.filter_text = event.value
        self.table.rebuild(self.snapshots)
        self._status()

    @on(Input.Submitted, "#filter")
    def filter_done(self) -> None:
        box = self.main.query_one("#filter", Input)
        box.display = bool(box.value)
        self.table.focus()

    def action_sort(self, sort_by: str | None = None) -> None:
        """Sort by `sort_by`, else by the next order; the header's arrow and the status line show it."""
        order = list(SORTS)
        nxt = sort_by if sort_by in SORTS else order[(order.index(self.table.sort_by) + 1) % len(order)]
        self.table.resort(self.snapshots, nxt, reverse=False)
        self._status()

    def action_reverse_sort(self) -> None:
        self.table.resort(self.snapshots, self.table.sort_by, reverse=not self.table.sort_reverse)
        self._status()

    def action_group(self) -> None:
        """Group the rows by the next of project, host, agent, state and tag, then not at all."""
        self.table.regroup(self.snapshots, next_group(self.table.group_by))
        self._status()

    def action_hide_ended(self) -> None:
        """Hide the sessions that have ended, or show them again."""
        self.table.hide_ended = not self.table.hide_ended
        self.table.rebuild(self.snapshots)
        self._status()

    def action_help(self) -> None:
        screen = self.screen if not isinstance(self.screen, (Sessions, SessionDetail, GatesQueue)) else None
        self.push_screen(Help(help_sections(screen, self.read_only, self.keymap), self.read_only))

    def palette_commands(self, screen: Screen[Any]) -> Iterable[tuple[str, str, Callable[[], object]]]:
        """(title, help, callback) of what the command palette opened on `screen` offers, in its order."""
        sessions = isinstance(screen, Sessions)
        if sessions:
            yield "Filter the sessions", "key /", lambda: self.run_action("filter")
            if self.table.filter_text:
                yield "Clear the filter", "key esc", self.main.query_one(FilterBox).action_clear
            for order in SORTS:
                yield f"Sort by {order}", "key s cycles the orders", partial(self.action_sort, order)
            yield "Reverse the sort order", "key S", self.action_reverse_sort
            yield ("Show ended sessions" if self.table.hide_ended else "Hide ended sessions"), "key h", \
                self.action_hide_ended
        yield "Help: every key and column", "key ?", self.action_help
        for binding in rebound(SESSION_KEYS + ACTION_KEYS, self.keymap):
            if binding.action in SESSIONS_ONLY:
                continue  # offered above, with their choices
            if binding.action in ACTION_ACTIONS and not getattr(screen, "ACTS_ON_SESSIONS", True):
                continue  # check_action below sees the palette, not the text view it opened on
            if self.check_action(binding.action, ()) and not (self.read_only and binding.action in MUTATING):
                yield binding.description, f"key {key_names(binding.key)}", partial(self.run_action, binding.action)
        if sessions:
            ordered = sorted(self.snapshots.values(), key=lambda s: session_number(str(s.get("id"))))
            for snap in ordered[-50:]:
                yield (f"Open {snap['id']} {escape(str(snap.get('name')))}",  # the palette reads markup
                       f"detail of a {snap.get('state')} session", partial(self._open, snap["id"]))
        for command in self.get_system_commands(screen):  # Textual's own: keys, theme, screenshot, quit
            if command.discover:
                yield command.title, command.help, command.callback

    def _open(self, sid: str) -> None:
        if sid in self.table.rows:
            self.table.move_cursor(row=self.table.get_row_index(sid))
            self.action_open_detail()


def help_sections(screen: Screen[Any] | None, read_only: bool = False,
                  keymap: dict[str, str] | None = None) -> list[tuple[str, list[Binding]]]:
    """Every key, where it works: the bindings themselves, so the help cannot drift from them. A read-only
    console lists no action keys (they would only be refused); `screen`'s own keys come first."""
    def bindings(items: Iterable[BindingType]) -> list[Binding]:
        return [b for b in rebound(items, keymap or {})
                if not (read_only and b.action.removeprefix("app.") in MUTATING)]

    moves = [b for b in bindings(SessionTable.BINDINGS) if b.action != "select_cursor"]  # enter: Open, below
    sections = [("Sessions table", [*moves, *bindings([*SESSION_KEYS, *Sessions.BINDINGS])]),
                ("Sessions and gates: actions on the selected one", bindings(ACTION_KEYS)),
                ("Gates queue (g)", bindings(GatesQueue.BINDINGS)),
                ("Session detail (enter)", bindings(SessionDetail.BINDINGS)),
                ("Session diff (v)", bindings(SessionDiff.BINDINGS)),
                ("Anywhere", bindings(GENERAL_KEYS))]
    if screen is not None and bindings(getattr(screen, "BINDINGS", [])):
        sections.insert(0, (getattr(screen, "HELP_TITLE", "This view"), bindings(screen.BINDINGS)))
    return [(title, keys) for title, keys in sections if keys]
