"""One action on many: the marked sessions (or gates) planned, confirmed once, sent one by one, reported once.

Each is sent as the same request the single-session key sends, so the daemon checks the operator and writes
the audit log for each one as it does for a single action.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.screen import Screen

from ..runtime.client import DaemonError
from ..supervisor.verdicts import FINAL_STATES, SessionState
from ..supervisor.visible import visible
from .dialogs import AskText, Confirm, ConfirmWithReason
from .gates import GatesQueue
from .session_table import SessionTable

if TYPE_CHECKING:
    from .app import ConsoleApp

ON_SESSIONS = ("approve", "deny", "pause", "resume", "kill", "reset", "inject")
ON_GATES = ("approve", "deny")
DEFAULT_NOTES = {"deny": "denied from the console", "kill": "killed from the console",
                 "reset": "reset from the console"}
SHOWN = 12  # targets listed by name in the confirmation and the report (of each outcome); the rest are counted
WHY_CHARS = 120  # of each refusal the daemon gave, in the report


@dataclass(frozen=True)
class Step:
    """One request of a bulk action: `target` names it in the dialog and the report."""

    target: str
    label: str
    fields: dict[str, Any]


@dataclass
class Plan:
    """What a bulk action will send, and what it leaves out and why."""

    action: str
    steps: list[Step] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def detail(self) -> Text:
        """The list the confirmation shows: every target, then what is skipped. Agent names are plain text."""
        out = Text()
        for step in self.steps[:SHOWN]:
            out.append(f"  {step.target}", style="bold")
            out.append(f"  {step.label}\n")
        if len(self.steps) > SHOWN:
            out.append(f"  … and {len(self.steps) - SHOWN} more\n")
        for target, why in self.skipped[:SHOWN]:
            out.append(f"  skipped {target}: {why}\n", style="yellow")
        if len(self.skipped) > SHOWN:
            out.append(f"  … and {len(self.skipped) - SHOWN} more skipped\n", style="yellow")
        return out


def refusal(action: str, snap: dict[str, Any]) -> str | None:
    """Why `action` cannot apply to this session now (one line), or None."""
    state = snap.get("state")
    if state in FINAL_STATES:
        return "it has ended"
    if snap.get("host_gone"):
        return "its host is not connected: its state is stale"
    if action in ON_GATES and not snap.get("pending_gates"):
        return f"no gate to {action}"
    if action == "pause" and state == SessionState.PAUSED:
        return "already paused"
    if action == "resume" and state != SessionState.PAUSED:
        return "not paused"
    return None


def plan_sessions(action: str, snaps: Iterable[dict[str, Any]],
                  incapable: Callable[[dict[str, Any], str], str | None]) -> Plan:
    """The requests `action` makes on each session: one per pending gate for approve and deny, else one."""
    plan = Plan(action)
    for snap in snaps:
        sid = str(snap.get("id"))
        label = visible(str(snap.get("name") or ""))[:40]
        why = refusal(action, snap) or incapable(snap, action)
        if why:
            plan.skipped.append((sid, why))
        elif action in ON_GATES:
            for gate in snap.get("pending_gates") or []:
                plan.steps.append(Step(f"{sid}:{gate}", label, {"gate": f"{sid}:{gate}"}))
        else:
            plan.steps.append(Step(sid, label, {"session": sid}))
    return plan


def plan_gates(action: str, gates: Iterable[dict[str, Any]]) -> Plan:
    plan = Plan(action)
    for gate in gates:
        label = visible(f"{gate.get('name') or gate.get('session')}  {gate.get('rule') or ''}")[:60]
        plan.steps.append(Step(str(gate["ref"]), label, {"gate": gate["ref"]}))
    return plan


def report(plan: Plan, done: list[str], refused: list[tuple[str, str]]) -> str:
    """The outcome of every target in one line: done, refused by the daemon, skipped before asking."""
    parts = [f"{plan.action} on {len(done)} of {len(plan.steps) + len(plan.skipped)}"]
    if done:
        more = f" and {len(done) - SHOWN} more" if len(done) > SHOWN else ""
        parts.append("done: " + ", ".join(done[:SHOWN]) + more)
    for word, outcomes in (("refused", refused), ("skipped", plan.skipped)):
        parts += [f"{word} {target}: {why[:WHY_CHARS]}" for target, why in outcomes[:SHOWN]]
        if len(outcomes) > SHOWN:
            parts.append(f"and {len(outcomes) - SHOWN} more {word}")
    return " · ".join(parts)


class BulkActions:
    """The console's actions on the marked rows; `takes` says whether a key is for them."""

    def __init__(self, app: ConsoleApp) -> None:
        self.app = app

    def marked_here(self) -> bool:
        """Rows are marked on the screen shown (the sessions table, or the gates queue)."""
        screen: Screen[Any] = self.app.screen
        if isinstance(screen, GatesQueue):
            return bool(len(screen.selection))
        if screen is not self.app.main:
            return False
        tables = screen.query(SessionTable)  # none until the screen is composed
        return bool(tables) and bool(tables.first().selection)

    def covers(self, action: str) -> bool:
        """`action` is one for the marked rows of the screen shown (its other keys act on the cursor's row)."""
        on_gates = isinstance(self.app.screen, GatesQueue)
        return action in (ON_GATES if on_gates else ON_SESSIONS) and self.marked_here()

    def takes(self, action: str) -> bool:
        """True when rows are marked on the screen shown and `action` was started on them here."""
        screen: Screen[Any] = self.app.screen
        if isinstance(screen, GatesQueue):
            gates = screen.marked
            if not gates or action not in ON_GATES:
                return False
            plan = plan_gates(action, gates)
        elif screen is self.app.main and self.app.table.marked and action in ON_SESSIONS:
            snaps = [self.app.snapshots[sid] for sid in self.app.table.marked if sid in self.app.snapshots]
            plan = plan_sessions(action, snaps, self.app._incapable)
        else:
            return False
        if self.app._allowed(action):
            self.confirm(plan)
        return True

    def confirm(self, plan: Plan) -> None:
        """One dialog for the whole plan; nothing is sent unless it is confirmed."""
        if not plan.steps:
            self.app.notify(report(plan, [], []), severity="warning", markup=False)
            return
        count = f"{len(plan.steps)} {'gate' if 'gate' in plan.steps[0].fields else 'session'}" \
                f"{'' if len(plan.steps) == 1 else 's'}"
        detail = plan.detail()
        if plan.action == "inject":
            self.app.push_screen(AskText(f"Message for {count}:", "sent to each one", detail=detail),
                                 lambda text: self.send(plan, {"text": text}) if text else None)
        elif plan.action in ("deny", "kill"):
            question = f"{plan.action.capitalize()} {count}? " + (
                "Their sessions will be terminated (loop_gate_denied)." if plan.action == "deny" else "")
            self.app.push_screen(ConfirmWithReason(question, "why, for the audit log (optional)", detail),
                                 lambda why: None if why is None else self.send(
                                     plan, {"note": why or DEFAULT_NOTES[plan.action]}))
        else:
            extra = {"note": DEFAULT_NOTES[plan.action]} if plan.action in DEFAULT_NOTES else {}
            self.app.push_screen(Confirm(f"{plan.action.capitalize()} {count}?", detail),
                                 lambda yes: self.send(plan, extra) if yes else None)

    def send(self, plan: Plan, extra: dict[str, Any]) -> None:
        self.app.run_worker(lambda: self._send(plan, extra), thread=True, exit_on_error=False, group="bulk")

    def _send(self, plan: Plan, extra: dict[str, Any]) -> None:
        """In a worker thread: each request in turn, a refusal never stopping the rest; one notification."""
        done: list[str] = []
        refused: list[tuple[str, str]] = []
        for step in plan.steps:
            if not self.app.feed.connected:  # the daemon reached now may not be the one the rows came from
                refused.append((step.target, "not sent, the console is not connected to the daemon"))
                continue
            try:
                self.app.feed.request(plan.action, **step.fields, **extra)
            except (DaemonError, OSError) as exc:
                refused.append((step.target, visible(str(exc))))
            else:
                done.append(step.target)
        severity = "warning" if refused or plan.skipped else "information"
        self.app.call_from_thread(self.app.notify, report(plan, done, refused), severity=severity, timeout=8,
                                  markup=False)
        self.app.call_from_thread(self.unmark)

    def unmark(self) -> None:
        """After the action the marks go, on the sessions and in the gates queue."""
        self.app.table.clear_marks()
        for screen in (self.app.screen, *self.app.screen_stack):
            if isinstance(screen, GatesQueue) and len(screen.selection):
                screen.action_back()  # with marks, esc only unmarks
