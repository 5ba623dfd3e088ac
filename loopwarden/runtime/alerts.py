"""Alerts: what the daemon tells a person away from the terminal, and whether it is sent now.

Pure (no I/O, the clock passed in): an alert is built from a record the daemon already has (a gate, a
stall verdict, an ended session's snapshot), every piece of agent text in it made visible; the policy
filters it by kind (`notify.events`), drops a repeat of the same session, kind and reason within
`notify.dedup_window`, and holds the rate to `notify.max_per_minute`, counting what it held back and
summing it up in one alert once there is room. notifier.py sends what is admitted.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


from ..supervisor.evidence import evidence_lines
from ..supervisor.messages import clip
from ..supervisor.verdicts import SessionState, Termination
from ..supervisor.visible import visible
from .ending import ending

REASON_CHARS = 200  # the reason, one line
EVIDENCE_CHARS = 600  # the key evidence, short enough for a phone
EVIDENCE_LINES = 8
EVIDENCE_LINE = 240  # characters of one fact
DEDUP_KEPT = 4096  # alert keys remembered for deduplication (the oldest forgotten first)
RATE_WINDOW = 60.0  # notify.max_per_minute counts sends in this many seconds
QUEUE_ALERTS = 100  # alerts waiting for one target at most...
QUEUE_BYTES = 256 << 10  # ... and bytes

HEADLINES = {"gate": "a gate waits for a human", "ask": "an agent asks a human",
             "budget": "a budget is reached: the session waits", "stall": "a session is stalled",
             "ended": "a session ended abnormally", "summary": "alerts held back", "test": "test alert"}
# how each alert type maps to apprise's notify types (its colour or icon on most services)
SEVERITY = {"gate": "warning", "ask": "warning", "budget": "warning", "stall": "warning", "ended": "failure",
            "summary": "info", "test": "info"}
# endings that are nobody's trouble: a clean exit, the operator's own kill, the operator stopping the daemon
QUIET_ENDINGS = frozenset({Termination.EXITED, Termination.OPERATOR, Termination.DAEMON_STOPPED})


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert: which session, why in one line, the key evidence, and how to decide."""

    kind: str  # gate, ask, budget, stall, ended (notify.events), or summary, test
    session: str  # the session's id ("" for summary and test)
    name: str
    host: str
    reason: str
    evidence: str = ""
    commands: tuple[str, ...] = ()
    link: str = ""
    ts: float = 0.0  # when it happened in the daemon (a gate's opened_at)
    ref: str = ""  # what it is about: s3:g1, s3
    dedup: str = ""  # what counts as the same reason (defaults to the reason)

    @property
    def title(self) -> str:
        who = f"{self.name} ({self.session})" if self.session else "loopwarden"
        return visible(clip(f"{who} on {self.host}: {HEADLINES.get(self.kind, self.kind)}", 250))

    @property
    def body(self) -> str:
        lines = [self.reason]
        if self.evidence:
            lines += ["evidence:", *(f"  {line}" for line in self.evidence.splitlines())]
        lines += [f"decide: {c}" if self.kind in ("gate", "ask", "budget") else f"see: {c}" for c in self.commands]
        if self.link:
            lines.append(self.link)
        return "\n".join(lines)

    @property
    def severity(self) -> str:
        return SEVERITY.get(self.kind, "info")

    @property
    def size(self) -> int:
        return len(self.title) + len(self.body)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.session, self.kind, self.dedup or self.reason


# ---- building alerts from the daemon's records ---------------------------------------------------------

def _line(text: Any, limit: int) -> str:
    return visible(clip(str(text or ""), limit))


def _evidence(evidence: Any, skip: Iterable[str] = ()) -> str:
    """A gate's or verdict's evidence in words, a fact per line (as the console's gates queue shows it),
    agent text made visible; at most EVIDENCE_LINES lines of EVIDENCE_CHARS in all."""
    if not isinstance(evidence, dict):
        return ""
    lines: list[str] = []
    used = 0
    for whole in evidence_lines(evidence, skip, limit=EVIDENCE_LINE):
        line = whole if len(whole) <= EVIDENCE_LINE else whole[: EVIDENCE_LINE - 1] + "…"
        if len(lines) == EVIDENCE_LINES or used + len(line) > EVIDENCE_CHARS:
            lines.append("…")
            break
        lines.append(visible(line))
        used += len(line)
    return "\n".join(lines)


def cli_prefix(home: str | None) -> str:
    """What the commands in an alert start with: the profile's LOOPWARDEN_HOME when it is not the default."""
    if not home:
        return "loopwarden"
    quoted = home if home.replace("/", "").replace("-", "").replace("_", "").replace(".", "").isalnum() \
        else "'" + home.replace("'", "'\\''") + "'"
    return f"LOOPWARDEN_HOME={quoted} loopwarden"


def fill_link(template: str, session: str, gate: str = "") -> str:
    """`notify.link` with {session} and {gate} filled in (plain replacement: a brace in it is no error)."""
    if not template:
        return ""
    return visible(template.replace("{session}", session).replace("{gate}", gate))


def gate_alert(session: str, name: str, host: str, gate: dict[str, Any], *, cli: str = "loopwarden",
               link: str = "") -> Alert | None:
    """A gate that just opened (an agent's own request is an `ask`); None for any other gate record."""
    if gate.get("status") != "pending" or not gate.get("id"):
        return None
    ref = f"{session}:{gate['id']}"
    rule = str(gate.get("rule") or "")
    kind = {"gate_request": "ask", "budget": "budget"}.get(rule, "gate")
    reason = _line(gate.get("reason"), REASON_CHARS)
    if kind == "gate" and rule:
        reason = _line(f"{rule}: {gate.get('reason') or ''}", REASON_CHARS)
    evidence = _evidence(gate.get("evidence"), skip=("request",) if kind == "ask" else ())
    commands: tuple[str, ...] = (f"{cli} approve {ref}", f'{cli} deny {ref} --note "..."')
    if kind == "budget":
        commands = (_raise_command(session, gate.get("evidence"), cli), *commands)
    return Alert(kind, session, _line(name, 80), host, reason, evidence, commands,
                 fill_link(link, session, str(gate["id"])), float(gate.get("opened_at") or 0.0), ref,
                 dedup=str(gate.get("reason") or ""))


def _raise_command(session: str, evidence: Any, cli: str) -> str:
    """How to raise the budget a budget gate names (its continuing the run)."""
    scope = evidence.get("budget") if isinstance(evidence, dict) else None
    if scope == "day":
        return f"{cli} set budgets.day_usd=..."
    if scope == "project":
        return f"{cli} set budgets.project_usd=... (or budgets.projects=PATH=USD)"
    key = "limits.max_tokens" if isinstance(evidence, dict) and evidence.get("what") == "token" else \
        "limits.max_cost_usd"
    return f"{cli} set {session} {key}=..."


def stall_alert(session: str, name: str, host: str, verdict: dict[str, Any], *, cli: str = "loopwarden",
                link: str = "") -> Alert | None:
    """A stall verdict (silent past limits.stall_timeout); None for any other verdict."""
    if verdict.get("rule") != "stall":
        return None
    reason = _line(f"stalled: {verdict.get('reason') or 'no activity'}", REASON_CHARS)
    commands = (f"{cli} logs {session}", f"{cli} kill {session}")
    return Alert("stall", session, _line(name, 80), host, reason, _evidence(verdict.get("evidence")), commands,
                 fill_link(link, session), float(verdict.get("ts") or 0.0), session, dedup="stall")


def abnormal(snap: dict[str, Any]) -> bool:
    """Whether a session ended in a way someone should hear of: terminated by a rule, crashed (a non-zero
    exit, a signal, the supervisor failing) or lost. A clean exit, the operator's own kill or deny, and
    the operator stopping the daemon are not."""
    state = str(snap.get("state") or "")
    if state == SessionState.LOST:
        return True
    termination = str(snap.get("termination") or "")
    if state == SessionState.TERMINATED and termination:
        if termination == Termination.LOOP_GATE_DENIED:  # a person's deny, unless a timeout policy denied it
            return "denied by policy" in str(snap.get("termination_text") or "")
        return termination not in QUIET_ENDINGS
    if state == SessionState.EXITED:  # by itself: a non-zero code or a signal is a crash
        code = snap.get("exit_code")
        return isinstance(code, int) and not isinstance(code, bool) and code != 0
    return False


def ended_alert(snap: dict[str, Any], host: str, *, cli: str = "loopwarden", link: str = "") -> Alert | None:
    """An ended session's alert, or None when it ended normally (see `abnormal`)."""
    if not abnormal(snap):
        return None
    session = str(snap.get("id") or "")
    reason = _line(ending(snap) or snap.get("state"), REASON_CHARS)
    facts = {"runtime": snap.get("runtime"), "events": snap.get("events"), "tool_calls": snap.get("tool_calls"),
             "exit_code": snap.get("exit_code"), "failure": snap.get("failure")}
    commands = (f"{cli} logs {session}", f"{cli} restart {session}")
    return Alert("ended", session, _line(snap.get("name"), 80), host, reason, _evidence(facts), commands,
                 fill_link(link, session), float(snap.get("ended_at") or 0.0), session,
                 dedup=str(snap.get("termination") or snap.get("state")))


def test_alert(host: str, now: float) -> Alert:
    return Alert("test", "", "loopwarden", host, "a test alert from 'loopwarden notify test': alerts reach you here",
                 ts=now)


# ---- the policy ------------------------------------------------------------------------------------

class AlertPolicy:
    """Which alerts are sent: filtered by kind, deduplicated within a window, held to a rate."""

    def __init__(self, events: Iterable[str], dedup_window: float, max_per_minute: int) -> None:
        self.events = frozenset(events)
        self.dedup_window = dedup_window
        self.max_per_minute = max_per_minute
        self.seen: OrderedDict[tuple[str, str, str], float] = OrderedDict()  # key -> when last admitted
        self.sent: deque[float] = deque()  # when each admitted alert of the last RATE_WINDOW was admitted
        self.held: int = 0  # rate-limited since the last summary
        self.held_kinds: dict[str, int] = {}

    def admit(self, alert: Alert, now: float) -> str:
        """'send', or why not: 'filtered', 'deduplicated', 'rate_limited'."""
        if alert.kind not in self.events:
            return "filtered"
        key = alert.key
        last = self.seen.get(key)
        if self.dedup_window and last is not None and now - last < self.dedup_window:
            return "deduplicated"
        if not self._room(now):
            self.held += 1
            self.held_kinds[alert.kind] = self.held_kinds.get(alert.kind, 0) + 1
            return "rate_limited"
        self.seen[key] = now
        self.seen.move_to_end(key)
        while len(self.seen) > DEDUP_KEPT:
            self.seen.popitem(last=False)
        self.sent.append(now)
        return "send"

    def _room(self, now: float) -> bool:
        while self.sent and now - self.sent[0] >= RATE_WINDOW:
            self.sent.popleft()
        return not self.max_per_minute or len(self.sent) < self.max_per_minute

    def summary_due(self) -> float | None:
        """When a summary of held-back alerts can go (None: nothing held back)."""
        if not self.held:
            return None
        return self.sent[0] + RATE_WINDOW if self.sent and self.max_per_minute else 0.0

    def summary(self, host: str, now: float, cli: str = "loopwarden") -> Alert | None:
        """One alert naming how many were held back by the rate limit, once there is room again."""
        if not self.held or not self._room(now):
            return None
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.held_kinds.items()))
        alert = Alert("summary", "", "loopwarden", host,
                      f"{self.held} alert{'s' if self.held != 1 else ''} not sent (notify.max_per_minute): {kinds}",
                      commands=(f"{cli} gates", f"{cli} ls"), ts=now)
        self.held, self.held_kinds = 0, {}
        self.sent.append(now)
        return alert


class AlertQueue:
    """Alerts waiting for one target, bounded by count and bytes: past either, an alert is refused."""

    def __init__(self, most: int = QUEUE_ALERTS, most_bytes: int = QUEUE_BYTES) -> None:
        self.most, self.most_bytes = most, most_bytes
        self.items: deque[Alert] = deque()
        self.bytes = 0

    def push(self, alert: Alert) -> bool:
        if len(self.items) >= self.most or self.bytes + alert.size > self.most_bytes:
            return False
        self.items.append(alert)
        self.bytes += alert.size
        return True

    def pop(self) -> Alert:
        alert = self.items.popleft()
        self.bytes -= alert.size
        return alert

    def __len__(self) -> int:
        return len(self.items)
