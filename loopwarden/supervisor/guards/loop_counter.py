"""The loop counter: exact repeats of a failure within a task open a human gate.

A failure is an `error` event, a failing `test_result`, or a failed tool result (what Claude Code, Codex and
ACP agents report: an `is_error` result, a non-zero exit code, a failed tool call); a failed result is the same
failure as an earlier one when it answers the same call (tool and arguments) and its output matches with the
volatile parts hidden (`failure_key`). The call counts: many failures say nothing of what was asked (an empty
`grep`, "File does not exist.", a 404), and different searches that find nothing are no loop."""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from math import sqrt
from typing import Final

from .. import kinds, messages
from ..config import Config, Loop
from ..events import Attempt, Collaboration, Done, Error, Event, TestResult, ToolCall, ToolResult
from ..signature import error_line, failure_key, failure_location
from ..verdicts import Action, Verdict
from .base import NO_VERDICTS, Counter, Guard, Observer

Similarity = Callable[[str, str], float]
_MAX_TASKS: Final = 256
_MAX_CALLS: Final = 512  # calls awaiting their result, by id: the oldest is forgotten past it
_SHOWN: Final = 300  # characters of a failure's message and location kept (its evidence shows no more)
_FAILURE_HEAD: Final = 64 * 1024  # characters of a failed output compared (failure_key reads no further)
_UNREAD_BUDGET: Final = 256 * 1024  # characters of failed outputs kept unread, across the session's tasks
_WORD: Final = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=64)  # a new request is compared with each kept one: each text's stems are counted once
def _stems(text: str) -> tuple[dict[str, int], float]:
    """A text's word stems (first four letters) with their counts, and the vector's length."""
    vec: dict[str, int] = {}
    for word in _WORD.findall(text.lower()):
        stem = word[:4]
        vec[stem] = vec.get(stem, 0) + 1
    return vec, sqrt(sum(n * n for n in vec.values()))


def lexical_similarity(a: str, b: str) -> float:
    """Cosine similarity of word stems (first four letters), so rewordings still match."""
    (va, la), (vb, lb) = _stems(a), _stems(b)
    if not va or not vb:
        return 1.0 if va == vb else 0.0
    dot = sum(n * vb.get(k, 0) for k, n in va.items())
    return dot / (la * lb)


_ERROR_TYPES: Final = (
    ("syntax", re.compile(r"syntax|parse error|unexpected token|indentation", re.I)),
    ("dependency", re.compile(r"modulenotfound|importerror|cannot find module|no module named|dependency"
                              r"|unresolved import", re.I)),
    ("network", re.compile(r"timeout|timed out|connection|econn|dns|unreachable|\b50[234]\b|rate limit|\b429\b", re.I)),
    ("permission", re.compile(r"permission denied|unauthori[sz]ed|forbidden|\b40[13]\b|auth", re.I)),
    ("test", re.compile(r"assert|test.*fail|failing test|expected .* got", re.I)),
    ("runtime", re.compile(r"error|exception|panic|traceback", re.I)),
)


def classify(message: str) -> str:
    """A coarse error type from the message, when the agent gave none."""
    for name, pattern in _ERROR_TYPES:
        if pattern.search(message):
            return name
    return "logic"


@dataclass(slots=True, frozen=True)
class FailureSignature:
    exact_message: str
    error_type: str | None  # None: classified from the message when shown (only a gate's evidence shows it)
    location: str
    seq: int
    ts: float
    agent: str | None
    key: str | bytes | None = None  # what repeats compare (a tool result's `failure_key`); None: the message

    def compared(self) -> str | bytes:
        """What a repeat must equal: the key, else the message."""
        return self.exact_message if self.key is None else self.key

    def evidence(self) -> dict[str, object]:
        return {"seq": self.seq, "ts": self.ts, "message": messages.clip(self.exact_message, 300),
                "error_type": self.error_type or classify(self.exact_message), "location": self.location,
                "agent": self.agent}


class ToolFailure:
    """A failed tool result, read only when it must be: its key when the same call fails again, its message and
    location when a gate shows it. Most failures are never compared (no other failure answers the same call), so
    most outputs are never normalised; the output is kept until it is read, within the guard's budget."""

    __slots__ = ("_key", "_shown", "_where", "agent", "call", "exit_code", "output", "seq", "size", "tool", "ts")

    def __init__(self, result: ToolResult, call: int | None, now: float) -> None:
        self.tool, self.call, self.exit_code = result.tool, call, result.exit_code
        self.output = result.output[:_FAILURE_HEAD]
        self.size = len(self.output)
        self.seq, self.ts, self.agent = result.seq, now, result.agent
        self._key: bytes | None = None
        self._shown = ""
        self._where = ""

    def settle(self) -> None:
        """Read the output once (its key, message and location), then let it go."""
        if self._key is not None:
            return
        output = self.output
        self._key = failure_key(self.tool, output)
        shown = error_line(output) or f"{self.tool or 'a tool'} failed" + (
            f" (exit code {self.exit_code})" if self.exit_code else "")
        self._shown = shown[:_SHOWN]
        self._where = (failure_location(output) or self.tool or "unknown")[:_SHOWN]
        self.output = ""

    @property
    def key(self) -> bytes:
        self.settle()
        assert self._key is not None
        return self._key

    @property
    def exact_message(self) -> str:
        self.settle()
        return self._shown

    @property
    def location(self) -> str:
        self.settle()
        return self._where

    def evidence(self) -> dict[str, object]:
        self.settle()
        return {"seq": self.seq, "ts": self.ts, "message": messages.clip(self._shown, 300),
                "error_type": classify(self._shown), "location": self._where, "agent": self.agent}


@dataclass
class LoopTracker:
    """One task's failure history and loop count (agent changes do not reset it)."""

    history: deque[FailureSignature | ToolFailure]
    collaborations: deque[Collaboration]
    loop_count: int = 0
    last_test: TestResult | None = None
    gate_open: bool = False
    reasons: list[str] = field(default_factory=list)


class LoopCounterGuard(Guard):
    name = "loop_counter"
    handles = (Error, TestResult, ToolCall, ToolResult, Collaboration, Done, Attempt)

    def __init__(self, cfg: Loop, similarity: Similarity = lexical_similarity) -> None:
        self.cfg = cfg
        self.similarity = similarity
        self.trackers: OrderedDict[str, LoopTracker] = OrderedDict()
        self.calls: OrderedDict[str, int] = OrderedDict()  # call id -> its signature, for its result's key
        self.last_call: int | None = None  # the latest call's signature, for a result without a call id
        self.unread: deque[ToolFailure] = deque()  # failures whose output may not be read yet, oldest first
        self.unread_chars = 0  # their outputs' sizes, within _UNREAD_BUDGET

    def hook(self, kind: type[Event]) -> Observer | None:
        return self._call if kind is ToolCall else self.observe

    def _call(self, call: ToolCall, now: float) -> Sequence[Verdict]:
        """Remember what was called, so that its failure is told by the call as well as by the output."""
        self.last_call = call.sig
        if call.call_id is not None and call.sig is not None:
            self.calls[call.call_id] = call.sig
            if len(self.calls) > _MAX_CALLS:
                self.calls.popitem(last=False)
        return NO_VERDICTS

    def tracker(self, task: str) -> LoopTracker:
        tracker = self.trackers.get(task)
        if tracker is None:
            tracker = LoopTracker(deque(maxlen=max(self.cfg.history, 1)), deque(maxlen=max(self.cfg.history, 1)))
            self.trackers[task] = tracker
            if len(self.trackers) > _MAX_TASKS:
                self.trackers.popitem(last=False)
        else:
            self.trackers.move_to_end(task)
        return tracker

    def configure(self, config: Config) -> None:
        self.cfg = config.loop  # loop.history is not taken: a task's evidence keeps its length

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        if type(event) is kinds.TOOL_CALL:  # a call judged by its tool's own thresholds comes this way
            return self._call(event, now)
        task = event.task or "default"
        if type(event) is kinds.DONE or (type(event) is kinds.ATTEMPT and event.status == "done"):
            self.trackers.pop(task, None)  # success resets the task's counter
            return NO_VERDICTS
        if type(event) is kinds.ATTEMPT:
            return NO_VERDICTS
        if type(event) is kinds.TOOL_RESULT:
            if not event.failed:
                return NO_VERDICTS  # a tool that worked is no task success: the counter stays
            return self._failure(task, self.tracker(task), self._tool_failure(event, now))
        tracker = self.tracker(task)
        if type(event) is kinds.ERROR:
            sig = self._signature(event, event.message, event.error_type, event.location, now)
            return self._failure(task, tracker, sig)
        if type(event) is kinds.TEST_RESULT:
            return self._test(task, tracker, event, now)
        assert type(event) is kinds.COLLABORATION
        return self._collaboration(task, tracker, event)

    def _signature(self, event: Event, message: str, error_type: str | None, location: str | None,
                   now: float) -> FailureSignature:
        """A failure kept by its first characters; a longer message is compared by its digest (the whole of it)."""
        key = None if len(message) <= _SHOWN else hashlib.blake2b(message.encode("utf-8", "surrogatepass"),
                                                                   digest_size=16).digest()
        return FailureSignature(message[:_SHOWN], error_type, (location or "unknown")[:_SHOWN], event.seq, now,
                                event.agent, key)

    def _tool_failure(self, result: ToolResult, now: float) -> ToolFailure:
        call = self.calls.pop(result.call_id, None) if result.call_id is not None else self.last_call
        failure = ToolFailure(result, call, now)
        self.unread.append(failure)
        self.unread_chars += failure.size
        while self.unread_chars > _UNREAD_BUDGET:  # the oldest outputs still in a history are read now, and let go
            oldest = self.unread.popleft()
            self.unread_chars -= oldest.size
            if oldest.output:
                oldest.settle()
        return failure

    def _failure(self, task: str, tracker: LoopTracker, sig: FailureSignature | ToolFailure) -> Sequence[Verdict]:
        if type(sig) is ToolFailure:  # the same call failing the same way: only then are the outputs read
            repeat = any(type(prev) is ToolFailure and prev.call == sig.call and prev.key == sig.key
                         for prev in tracker.history)
        else:
            assert type(sig) is FailureSignature
            key = sig.compared()
            repeat = any(type(prev) is FailureSignature and prev.compared() == key for prev in tracker.history)
        history = tracker.history
        if len(history) == history.maxlen:
            dropped = history[0]
            if type(dropped) is ToolFailure and dropped.output:
                dropped.output = ""  # out of the history, never compared again: its output need not be read
        history.append(sig)
        if not repeat:
            return NO_VERDICTS
        return self._increment(task, tracker, "exact error message match", sig.exact_message)

    def _test(self, task: str, tracker: LoopTracker, result: TestResult, now: float) -> Sequence[Verdict]:
        previous, tracker.last_test = tracker.last_test, result
        if result.failed == 0:
            return NO_VERDICTS
        if previous is not None:
            more_coverage = (result.coverage is not None and previous.coverage is not None
                             and result.coverage > previous.coverage)
            if result.failed < previous.failed or more_coverage:
                return NO_VERDICTS  # progress: fewer failures or more coverage
            if result.failed > previous.failed:
                text = f"regression: {previous.failed} -> {result.failed} failing tests"
                sig = self._signature(result, text, "test", None, now)
                tracker.history.append(sig)
                return self._increment(task, tracker, "test regression", text)
        names = ", ".join(sorted(result.failing or []))
        text = f"{result.failed} failing tests" + (f": {names}" if names else "")
        return self._failure(task, tracker, self._signature(result, text, "test", None, now))

    def _collaboration(self, task: str, tracker: LoopTracker, collab: Collaboration) -> Sequence[Verdict]:
        similar = next((c for c in tracker.collaborations
                        if c.from_agent == collab.from_agent and c.to_agent == collab.to_agent
                        and self.similarity(c.request, collab.request) >= self.cfg.similarity), None)
        tracker.collaborations.append(collab)
        if similar is None:
            return NO_VERDICTS
        text = f"{collab.from_agent} -> {collab.to_agent}: {collab.request}"
        return self._increment(task, tracker, "repeated collaboration request", text)

    def _increment(self, task: str, tracker: LoopTracker, why: str, message: str) -> Sequence[Verdict]:
        tracker.loop_count += 1
        tracker.reasons.append(why)
        if tracker.loop_count < self.cfg.gate_after or tracker.gate_open or not self.cfg.gate_after:
            return NO_VERDICTS
        tracker.gate_open = True
        evidence = {
            "task": task, "loop_count": tracker.loop_count, "why": why,
            "failures": [sig.evidence() for sig in tracker.history],
        }
        reason = messages.loop_gate(task, tracker.loop_count, why, message)
        return (Verdict(Action.GATE, self.name, reason, evidence=evidence),)

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "loop", "loop_counter"):
            self.trackers.clear()
            self.unread.clear()
            self.unread_chars = 0

    def counters(self) -> list[Counter]:
        worst = max((t.loop_count for t in self.trackers.values()), default=0)
        return [Counter("loop", worst, self.cfg.gate_after)]
