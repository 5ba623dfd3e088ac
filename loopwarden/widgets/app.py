"""The operator console: every session at a glance, live from the daemon."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Header, Label, Static

from ..supervisor.client import DaemonError
from ..supervisor.config import format_duration
from ..supervisor.paths import Paths
from ..supervisor.verdicts import FINAL_STATES
from .feed import Feed

DRAW_SECONDS = 0.25  # live data is drawn on a timer, a few times a second, never per event

COLUMNS = (("id", "ID"), ("name", "NAME"), ("adapter", "ADAPTER"), ("state", "STATE"), ("runtime", "RUNTIME"),
           ("calls", "CALLS"), ("repetition", "REPEAT"), ("validation", "VALID"), ("loop", "LOOP"),
           ("gates", "GATES"), ("cpu", "CPU"), ("mem", "MEM"), ("reason", "ENDED"))

_STATE_STYLE = {"running": "green", "gated": "bold magenta", "paused": "yellow", "stopping": "yellow",
                "exited": "dim", "terminated": "red", "lost": "red", "starting": "cyan"}


def _counter(snap: dict[str, Any], name: str) -> Text:
    value, limit = (snap.get("counters") or {}).get(name, [0, 0])
    text = f"{value:g}/{limit:g}" if limit else f"{value:g}"
    ratio = value / limit if limit else 0
    return Text(text, style="bold red" if ratio >= 1 else "yellow" if ratio >= 0.6 else "")


def row_cells(snap: dict[str, Any]) -> dict[str, Any]:
    """The cells of one session's row, by column key."""
    state = str(snap.get("state") or "?")
    limit = snap.get("max_runtime") or 0
    elapsed = snap.get("runtime") or 0
    if state not in FINAL_STATES and snap.get("started_at"):
        elapsed = max(elapsed, time.time() - snap["started_at"])  # a quiet session publishes nothing
    runtime = format_duration(elapsed) + (f"/{format_duration(limit)}" if limit else "")
    gates = len(snap.get("pending_gates") or [])
    rss = snap.get("rss") or 0
    return {
        "id": Text(("! " if gates else "  ") + str(snap.get("id")), style="bold magenta" if gates else ""),
        "name": str(snap.get("name") or "")[:24],
        "adapter": str(snap.get("adapter") or ""),
        "state": Text(state, style=_STATE_STYLE.get(state, "")),
        "runtime": runtime,
        "calls": str(snap.get("tool_calls") or 0),
        "repetition": _counter(snap, "identical_calls"),
        "validation": _counter(snap, "validation"),
        "loop": _counter(snap, "loop"),
        "gates": Text(str(gates), style="bold magenta" if gates else "dim"),
        "cpu": f"{snap.get('cpu_percent') or 0:.0f}%",
        "mem": f"{rss / (1 << 20):.0f}M" if rss else "-",
        "reason": str(snap.get("termination") or (f"exit {snap.get('exit_code')}" if state == "exited" else "")),
    }


class Confirm(ModalScreen[bool]):
    """A yes/no question for destructive keys."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question)
            yield Button("Yes (y)", id="yes", variant="error")
            yield Button("No (n)", id="no")

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class ConsoleApp(App[None]):
    """k9s for agents: a live table of sessions, single-key actions, confirmation on destructive keys."""

    TITLE = "loopwarden"
    CSS = """
    #status { height: 1; padding: 0 1; color: $text-muted; }
    Confirm { align: center middle; }
    #dialog { width: 60; height: auto; border: thick $error; padding: 1 2; background: $surface; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("k", "kill", "Kill", id="kill"),
        Binding("p", "pause", "Pause", id="pause"),
        Binding("r", "resume", "Resume", id="resume"),
        Binding("a", "approve", "Approve gate", id="approve"),
    ]

    def __init__(self, paths: Paths, *, read_only: bool = False, autostart: bool = True) -> None:
        super().__init__()
        self.paths = paths
        self.read_only = read_only
        self.feed = Feed(paths, autostart=autostart)
        self.snapshots: dict[str, dict[str, Any]] = {}
        self._shown: dict[str, dict[str, Any]] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield Static("connecting to the daemon…", id="status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#sessions", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        self.feed.start()
        self.set_interval(DRAW_SECONDS, self.draw)

    def on_unmount(self) -> None:
        self.feed.close()

    def draw(self) -> None:
        """Apply what the feed buffered since the last tick, in one batch, by row key."""
        if self.feed.sessions and not self.snapshots:
            for snap in self.feed.sessions:
                self.snapshots[snap["id"]] = snap
        changed = {m["session"] for m in self.feed.drain() if m.get("kind") == "session" and self._keep(m)}
        changed |= {sid for sid, snap in self.snapshots.items() if snap.get("state") not in FINAL_STATES}
        if self.feed.sessions or changed:
            self.feed.sessions = []
            changed |= set(self.snapshots)
        status = self.query_one("#status", Static)
        if self.feed.error:
            status.update(f"[red]daemon: {self.feed.error}[/]")
        elif self.feed.ready:
            live = sum(1 for s in self.snapshots.values() if s.get("state") not in FINAL_STATES)
            gated = sum(1 for s in self.snapshots.values() if s.get("pending_gates"))
            status.update(f"{len(self.snapshots)} sessions, {live} live, {gated} waiting for a human"
                          + ("  [yellow]read-only[/]" if self.read_only else ""))
        if not changed:
            return
        table = self.query_one("#sessions", DataTable)
        with self.batch_update():
            for sid in sorted(changed, key=lambda s: int(s[1:]) if s[1:].isdigit() else 0):
                cells = row_cells(self.snapshots[sid])
                shown = self._shown.get(sid)
                if shown is None:
                    table.add_row(*cells.values(), key=sid)
                else:
                    for key, value in cells.items():
                        if shown.get(key) != value:  # only the cells that changed
                            table.update_cell(sid, key, value, update_width=True)
                self._shown[sid] = cells

    def _keep(self, message: dict[str, Any]) -> bool:
        data = message.get("data") or {}
        if data.get("id"):
            self.snapshots[data["id"]] = data
            return True
        return False

    # ---- actions on the selected session ------------------------------------
    def selected(self) -> dict[str, Any] | None:
        table = self.query_one("#sessions", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.snapshots.get(str(key))

    def _mutating(self) -> dict[str, Any] | None:
        if self.read_only:
            self.notify("read-only console: actions are disabled", severity="warning")
            return None
        snap = self.selected()
        if snap is None:
            self.notify("no session selected", severity="warning")
        return snap

    def action_kill(self) -> None:
        snap = self._mutating()
        if snap is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.act("kill", session=snap["id"], note="killed from the console")

        self.push_screen(Confirm(f"Kill session {snap['id']} ({snap.get('name')})?"), answered)

    def action_pause(self) -> None:
        snap = self._mutating()
        if snap is not None:
            self.act("pause", session=snap["id"])

    def action_resume(self) -> None:
        snap = self._mutating()
        if snap is not None:
            self.act("resume", session=snap["id"])

    def action_approve(self) -> None:
        snap = self._mutating()
        if snap is None:
            return
        gates = snap.get("pending_gates") or []
        if not gates:
            self.notify(f"session {snap['id']} has no gate waiting", severity="warning")
            return
        self.act("approve", gate=f"{snap['id']}:{gates[0]}")

    @work(thread=True, exit_on_error=False)
    def act(self, op: str, **fields: Any) -> None:
        """Send one request to the daemon off the UI thread; the result comes back as a notification."""
        try:
            self.feed.request(op, **fields)
        except (DaemonError, OSError) as exc:
            self.call_from_thread(self.notify, f"{op}: {exc}", severity="error")
            return
        target = fields.get("session") or fields.get("gate")
        self.call_from_thread(self.notify, f"{op} {target}: done")
