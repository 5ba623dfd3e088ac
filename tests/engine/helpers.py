"""Builders and a driver for the rule tests: events in, verdicts out, with an injected clock.

Every builder leaves `seq` at 0 unless given; the driver numbers such events by their
1-based position in the session, so a test can say "the verdict came from event 7".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from loopwarden.supervisor import events as ev
from loopwarden.supervisor.config import Config, load_config
from loopwarden.supervisor.health import SessionHealth
from loopwarden.supervisor.verdicts import Action, Termination, Verdict

__all__ = [
    "Action", "Termination", "Verdict", "Session", "run", "config",
    "call", "result", "ok", "fail", "msg", "user", "system_nudge", "condensation", "verr", "invalid",
    "error", "suite", "attempt", "iteration", "usage", "collab", "gate_request", "done",
    "summary", "of", "one", "history_seqs",
]


# ---- configuration ---------------------------------------------------------
def config(*sets: str, preset: str | None = None) -> Config:
    """A Config from `section.key=value` strings (no environment, no file)."""
    return load_config(env={}, preset=preset, sets=list(sets))


# ---- event builders --------------------------------------------------------
def call(tool: str, args: dict[str, Any] | None = None, seq: int = 0, call_id: str | None = None,
         **kw: Any) -> ev.ToolCall:
    return ev.ToolCall(tool=tool, args={} if args is None else args, seq=seq, call_id=call_id, **kw)


def result(output: str, seq: int = 0, tool: str | None = None, call_id: str | None = None,
           is_error: bool = False, exit_code: int | None = None, **kw: Any) -> ev.ToolResult:
    return ev.ToolResult(output=output, seq=seq, tool=tool, call_id=call_id, is_error=is_error,
                         exit_code=exit_code, **kw)


def ok(tool: str, output: str = "ok", **kw: Any) -> ev.ToolResult:
    return result(output, tool=tool, **kw)


def fail(tool: str, output: str = "error", **kw: Any) -> ev.ToolResult:
    return result(output, tool=tool, is_error=True, **kw)


def msg(text: str, **kw: Any) -> ev.AssistantMessage:
    return ev.AssistantMessage(text=text, **kw)


def user(text: str = "please try something else", **kw: Any) -> ev.UserMessage:
    return ev.UserMessage(text=text, **kw)


def system_nudge(text: str = "Reminder: keep going.", **kw: Any) -> ev.SystemNudge:
    return ev.SystemNudge(text=text, **kw)


def condensation(text: str | None = "trimmed context", **kw: Any) -> ev.Condensation:
    return ev.Condensation(text=text, **kw)


def verr(message: str = "tool call arguments are not valid JSON", **kw: Any) -> ev.ValidationError:
    return ev.ValidationError(message=message, **kw)


def invalid(reason: str = "not valid JSON (truncated)", **kw: Any) -> ev.InvalidLine:
    return ev.InvalidLine(reason=reason, **kw)


def error(message: str, task: str | None = "T1", agent: str | None = "agent1", **kw: Any) -> ev.Error:
    return ev.Error(message=message, task=task, agent=agent, **kw)


def suite(failed: int, passed: int = 10, failing: list[str] | None = None, coverage: float | None = None,
          task: str | None = "T1", **kw: Any) -> ev.TestResult:
    return ev.TestResult(passed=passed, failed=failed, failing=failing, coverage=coverage, task=task, **kw)


def attempt(task: str, status: str, blockers: Iterable[str] = (), work: Iterable[str] = (),
            **kw: Any) -> ev.Attempt:
    return ev.Attempt(task=task, status=status, blockers=list(blockers), work=list(work), **kw)


def iteration(n: int, status: str, files: list[str] | None = None, failing: list[str] | None = None,
              error: str | None = None, **kw: Any) -> ev.Iteration:
    return ev.Iteration(n=n, status=status, files_modified=files, failing_tests=failing, error=error, **kw)


def usage(input_tokens: int, output_tokens: int, cost: float | None = None, **kw: Any) -> ev.Usage:
    return ev.Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost, **kw)


def collab(from_agent: str, to_agent: str, request: str, task: str | None = "task1", **kw: Any) -> ev.Collaboration:
    return ev.Collaboration(from_agent=from_agent, to_agent=to_agent, request=request, task=task, **kw)


def gate_request(reason: str, **kw: Any) -> ev.GateRequest:
    return ev.GateRequest(reason=reason, **kw)


def done(task: str | None = None, summary: str | None = None, **kw: Any) -> ev.Done:
    return ev.Done(task=task, summary=summary, **kw)


# ---- the driver ------------------------------------------------------------
class Session:
    """One SessionHealth fed with an injected clock: the n-th event is observed at start + (n-1)*step."""

    def __init__(self, cfg: Config | None = None, start: float = 0.0, step: float = 1.0, **kw: Any) -> None:
        self.health = SessionHealth(cfg if cfg is not None else Config(), **kw)
        self.now = start
        self.step = step
        self.seq = 0
        self.verdicts: list[Verdict] = []

    def feed(self, *events: ev.Event) -> list[Verdict]:
        """Observe each event at the current time, then advance the clock by `step`."""
        out: list[Verdict] = []
        for event in events:
            out.extend(self.at(self.now, event))
            self.now += self.step
        return out

    def at(self, now: float, event: ev.Event) -> list[Verdict]:
        """Observe one event at an explicit time (the clock then continues from there)."""
        self.seq += 1
        if event.seq == 0:
            event.seq = self.seq
        else:
            self.seq = max(self.seq, event.seq)
        self.now = now
        out = list(self.health.observe(event, now))
        self.verdicts.extend(out)
        return out

    def tick(self, now: float) -> list[Verdict]:
        self.now = now
        out = list(self.health.tick(now))
        self.verdicts.extend(out)
        return out

    def decide(self, gate_id: str, approve: bool, note: str | None = None) -> list[Verdict]:
        out = list(self.health.decide(gate_id, approve, self.now, note=note))
        self.verdicts.extend(out)
        return out


def run(events: Sequence[ev.Event], config: Config | None = None, start: float = 0.0,
        step: float = 1.0) -> list[Verdict]:
    """Feed `events` through one fresh SessionHealth and return every verdict, in order."""
    return Session(config, start=start, step=step).feed(*events)


# ---- looking at verdicts ---------------------------------------------------
def summary(verdicts: Iterable[Verdict]) -> list[tuple[str, str, int]]:
    """(action, rule, seq) of each verdict: the shape most assertions compare."""
    return [(str(v.action), v.rule, v.seq) for v in verdicts]


def of(verdicts: Iterable[Verdict], action: Action | str | None = None, rule: str | None = None) -> list[Verdict]:
    return [v for v in verdicts
            if (action is None or v.action == action) and (rule is None or v.rule == rule)]


def one(verdicts: Iterable[Verdict], action: Action | str | None = None, rule: str | None = None) -> Verdict:
    found = of(verdicts, action, rule)
    assert len(found) == 1, f"expected exactly one {action or ''} {rule or ''} verdict, got {summary(found)}"
    return found[0]


def history_seqs(evidence: dict[str, Any]) -> list[int]:
    """The seqs named by the first list of records (dicts with a 'seq') found in a verdict's evidence."""
    for value in evidence.values():
        if isinstance(value, list) and value and all(isinstance(x, dict) and "seq" in x for x in value):
            return [x["seq"] for x in value]
    raise AssertionError(f"no history of records with a 'seq' in evidence {evidence!r}")
