"""A budget of failed test or lint rounds per task since the last human message (Aider's max_reflections).

Aider retries a failed lint or test round at most 3 times per user message, then stops and hands
back to the user. A round here is a test or lint command run through a tool (see
`reflections.commands`) whose result failed; a passing round (or a passing `test_result`) or a
human message starts the budget over. A failing `test_result` that answers a check command is that
command's failed round, even when it reports fewer failures than the last (a budget of rounds, not of
progress); one that answers no command is left to loop_counter, which weighs progress.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any, Final

from .. import messages
from ..checks import CheckCommands, command_text
from ..config import Config
from ..events import Event, TestResult, ToolCall, ToolResult, UserMessage
from ..verdicts import Action, Verdict
from .base import NO_VERDICTS, Counter, Observer, TypedGuard

_MAX_TASKS: Final = 256
_HISTORY: Final = 10


class _Rounds:
    __slots__ = ("count", "history")

    def __init__(self) -> None:
        self.count = 0
        self.history: deque[dict[str, Any]] = deque(maxlen=_HISTORY)  # the latest rounds, as evidence


class ReflectionsGuard(TypedGuard):
    """Per task, failed rounds since the last passing round or human message; past the budget, a gate."""

    name = "reflections"
    handles = (ToolCall, ToolResult, TestResult, UserMessage)

    def __init__(self, config: Config) -> None:
        self.rounds: OrderedDict[str | None, _Rounds] = OrderedDict()
        self.pending: dict[str | None, str] = {}  # call id -> the check command it ran
        self.pending_any: str | None = None  # the last check command, for results without a call id
        self.pending_task: str | None = None
        # the latest check run whose result passed, its task and the rounds that pass cleared: a failing
        # test_result right after it reports on that run (the exit code said nothing)
        self.answered: tuple[str | None, str, _Rounds | None] | None = None
        self.configure(config)

    def configure(self, config: Config) -> None:
        self.limit = config.reflections.max_rounds
        self.checks = CheckCommands(config.reflections.commands)

    def hook(self, kind: type[Event]) -> Observer | None:
        if kind is ToolCall:
            return self._call
        if kind is ToolResult:
            return self._result
        return self._suite if kind is TestResult else self._human

    def _human(self, event: Event, now: float) -> Sequence[Verdict]:
        self._clear()  # a human message: a new budget, whatever reset_on_user_message says (as in Aider)
        return NO_VERDICTS

    def _call(self, call: ToolCall, now: float) -> Sequence[Verdict]:
        self.answered = None
        command = command_text(call.args)
        if command is None or not self.limit or not self.checks.matches(command):
            self.pending_any = None
            return NO_VERDICTS
        self.pending_any, self.pending_task = command, call.task
        if call.call_id is not None:
            self.pending[call.call_id] = command
            if len(self.pending) > _MAX_TASKS:
                self.pending.pop(next(iter(self.pending)))
        return NO_VERDICTS

    def _result(self, result: ToolResult, now: float) -> Sequence[Verdict]:
        if self.pending_any is None and not self.pending:
            return NO_VERDICTS  # no check command is waiting for its result
        command = self.pending.pop(result.call_id, None) if result.call_id is not None else None
        command = command or self.pending_any
        self.pending_any = None
        if command is None:
            return NO_VERDICTS
        task = result.task or self.pending_task
        if not result.failed:
            self.answered = (task, command, self.rounds.pop(task, None))
            return NO_VERDICTS
        return self._failed(task, result.seq, messages.clip(command, 120), messages.outcome(result.output, True))

    def _suite(self, suite: TestResult, now: float) -> Sequence[Verdict]:
        """A test report: passing, it ends the rounds; failing, it is a failed round when it answers a check
        command (one whose result has not come, or whose result passed just before)."""
        answered, self.answered = self.answered, None
        if suite.failed <= 0:
            self.rounds.pop(suite.task, None)
            return NO_VERDICTS
        if self.pending_any is not None:
            command, task = self.pending_any, suite.task or self.pending_task
            self.pending_any = None
            self.pending = {k: v for k, v in self.pending.items() if v is not command}  # its result is this
        elif answered is not None:
            task, command, cleared = answered
            task = suite.task or task
            if cleared is not None:
                self.rounds[task] = cleared  # the passing exit code was no passing round
        else:
            return NO_VERDICTS  # a report of no command seen: loop_counter weighs it
        names = ", ".join(sorted(suite.failing or []))
        outcome = f"{suite.failed} failing tests" + (f": {messages.clip(names, 100)}" if names else "")
        return self._failed(task, suite.seq, messages.clip(command, 120), outcome)

    def _failed(self, task: str | None, seq: int, what: str, last: str) -> Sequence[Verdict]:
        if not self.limit:
            return NO_VERDICTS
        rounds = self.rounds.get(task)
        if rounds is None:
            rounds = self.rounds[task] = _Rounds()
            if len(self.rounds) > _MAX_TASKS:
                self.rounds.popitem(last=False)
        rounds.count += 1
        rounds.history.append({"seq": seq, "round": what, "outcome": last})
        count = rounds.count
        if count != self.limit + 1:
            return NO_VERDICTS
        evidence = {"task": task, "rounds": count, "limit": self.limit, "history": list(rounds.history)}
        return (Verdict(Action.GATE, self.name, f"{count} failed test or lint rounds (budget {self.limit})",
                        message=messages.reflections_gate(count, self.limit, task, last), evidence=evidence),)

    def _clear(self) -> None:
        self.rounds.clear()
        self.pending.clear()
        self.pending_any = self.answered = None

    def human_turn(self) -> None:
        self._clear()

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "reflections"):
            self._clear()

    def counters(self) -> list[Counter]:
        worst = max((r.count for r in self.rounds.values()), default=0)
        return [Counter("reflections", worst, self.limit)]
