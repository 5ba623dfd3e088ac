"""The console of `loopwarden demo`: the header counts the demo's agents, and ctrl+r starts a new round."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from textual import work
from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from ..runtime.client import DaemonError
from ..supervisor.verdicts import FINAL_STATES
from ..supervisor.visible import visible
from .app import ConsoleApp
from .help import Help
from .session_table import session_number

RESTART = Binding("ctrl+r", "restart_demo", "Restart demo", id="restart_demo")


def demo_title(snapshots: Iterable[dict[str, Any]]) -> str:
    """The header's line: how many scripted agents the demo daemon has, and how many are live."""
    snaps = list(snapshots)
    live = sum(1 for s in snaps if s.get("state") not in FINAL_STATES)
    return f"demo · {len(snaps)} scripted agents, {live} live"


class DemoConsole(ConsoleApp):
    """The console on the demo daemon; `new_round` gives the `run` specs of a fresh round of agents."""

    BINDINGS: ClassVar[list[BindingType]] = [RESTART]

    def __init__(self, *args: Any, new_round: Callable[[], list[dict[str, Any]]], agents: int,
                 **kwargs: Any) -> None:
        super().__init__(*args, title=f"demo · {agents} scripted agents", **kwargs)
        self.new_round = new_round
        self.ordered = False  # the first rows seen decide whether the newest round goes on top

    def draw(self) -> None:
        super().draw()
        title = demo_title(self.snapshots.values())
        if self.snapshots and title != self.sub_title:
            self.sub_title = title
        if self.snapshots and not self.ordered:
            self.ordered = True
            if earlier_rounds(self.snapshots.values()):
                self.newest_first()

    def newest_first(self) -> None:
        """The newest round on top: a new round must not start below the screen, under the ended ones."""
        self.table.resort(self.snapshots, "id", reverse=True)
        self.table.move_cursor(row=0)  # the selection kept by the resort (an old row) would scroll the view to it
        self._status()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "restart_demo":
            return not self.read_only  # False: not even shown on a watch-only console
        return super().check_action(action, parameters)

    def action_help(self) -> None:
        super().action_help()
        shown = self.screen_stack[-1]
        if isinstance(shown, Help) and not self.read_only:  # pushed, not composed yet
            shown.sections = [*shown.sections, ("Demo", [RESTART])]

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if not self.read_only:
            yield SystemCommand(RESTART.description, "key ctrl+r: stop the live demo agents, start a new round",
                                self.action_restart_demo)

    def action_restart_demo(self) -> None:
        if not self._allowed("restart the demo"):  # refused while disconnected, like every other action
            return
        live = sorted(sid for sid, s in self.snapshots.items() if s.get("state") not in FINAL_STATES)
        if not live:
            self.restart(live)
            return
        self._confirm(f"Restart the demo? {len(live)} live session(s) stop, a new round starts.",
                      lambda: self.restart(live))

    @work(thread=True, exclusive=True, group="restart", exit_on_error=False)
    def restart(self, live: list[str]) -> None:
        """Stop the live demo sessions, then launch a new round (off the UI thread: a dozen requests)."""
        for sid in live:
            try:
                self.feed.request("kill", session=sid, note="demo restarted from the console")
            except DaemonError:
                pass  # it ended meanwhile
            except OSError:
                break  # the daemon is gone: the run below says so
        try:
            started = [self.feed.request("run", spec=spec)["id"] for spec in self.new_round()]
        except (DaemonError, OSError) as exc:
            self.call_from_thread(self.notify, f"restart: {visible(str(exc))}", severity="error", markup=False)
            return
        news = f"demo restarted: {len(started)} new sessions ({started[0]} to {started[-1]})"
        self.call_from_thread(self.newest_first)
        self.call_from_thread(self.notify, news, timeout=4, markup=False)


def earlier_rounds(snapshots: Iterable[dict[str, Any]]) -> bool:
    """Whether sessions of an earlier round (ended, older than every live one) are in the table."""
    snaps = list(snapshots)
    live = [session_number(str(s.get("id"))) for s in snaps if s.get("state") not in FINAL_STATES]
    first_live = min(live) if live else None
    return first_live is not None and any(session_number(str(s.get("id"))) < first_live
                                          and s.get("state") in FINAL_STATES for s in snaps)
