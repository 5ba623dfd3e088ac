"""A budget of failed test or lint rounds per task since the last human message (Aider's max_reflections).

Aider retries a failed lint or test round at most 3 times per user message, then stops and hands
back to the user. A round here is a test or lint command run through a tool (see
`reflections.commands`) whose result failed; a passing round (or a passing `test_result`) or a
human message starts the budget over. Failing `test_result` events are left to loop_counter, which
tells their progress (fewer failing tests, more coverage) from repeats and regressions.
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any, Final

from .. import messages
from ..config import Config
from ..events import Event, TestResult, ToolCall, ToolResult, UserMessage
from ..verdicts import Action, Verdict
from .base import NO_VERDICTS, Counter, Observer, TypedGuard

_MAX_TASKS: Final = 256
_HISTORY: Final = 10


def command_text(args: dict[str, Any]) -> str | None:
    """A shell call's command line ("command", "cmd", or an argv list), else None."""
    value = args.get("command", args.get("cmd"))
    if type(value) is str:
        return value
    if type(value) is list and all(type(v) is str for v in value):
        return " ".join(value)
    return None


def commands_pattern(commands: list[str]) -> re.Pattern[str]:
    words = sorted((re.escape(c).replace(r"\ ", r"\s+") for c in commands), key=len, reverse=True)
    return re.compile(r"(?<![\w.-])(?:" + "|".join(words) + r")(?![\w-])")


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
        self.configure(config)

    def configure(self, config: Config) -> None:
        self.limit = config.reflections.max_rounds
        self.pattern = commands_pattern(config.reflections.commands)
        self.first_words = frozenset(c.split()[0] for c in config.reflections.commands if c.split())

    def _is_check(self, command: str) -> bool:
        """Cheap pre-check first (a word of the command, path stripped, starts an entry), then the pattern."""
        first = self.first_words
        words = command.split()
        if "/" not in command and first.isdisjoint(words):
            return False  # no word is a path, so none has a path to strip: one set test in C (most commands)
        for word in words:
            if word.rpartition("/")[2] in first:
                return self.pattern.search(command) is not None
        return False

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
        command = command_text(call.args)
        if command is None or not self.limit or not self._is_check(command):
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
            self.rounds.pop(task, None)
            return NO_VERDICTS
        return self._failed(task, result.seq, messages.clip(command, 120), messages.outcome(result.output, True))

    def _suite(self, suite: TestResult, now: float) -> Sequence[Verdict]:
        if suite.failed <= 0:
            self.rounds.pop(suite.task, None)
        return NO_VERDICTS

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
        self.pending_any = None

    def human_turn(self) -> None:
        self._clear()

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "reflections"):
            self._clear()

    def counters(self) -> list[Counter]:
        worst = max((r.count for r in self.rounds.values()), default=0)
        return [Counter("reflections", worst, self.limit)]
