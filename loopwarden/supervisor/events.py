"""Event types: the normalised things an agent does, whatever its wire format."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


_HIDDEN = frozenset({"seq", "sig", "digest"})  # the engine's own fields, never shown or stored
_SHOWN: dict[type, tuple[str, ...]] = {}  # event class -> the fields to_dict shows, in order


@dataclass(slots=True, kw_only=True)
class Event:
    """Fields every event carries; `seq` is the 1-based input line that produced it."""

    kind: ClassVar[str] = "event"
    seq: int = 0
    ts: float | None = None
    task: str | None = None
    agent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The event as a protocol-shaped dict (for storage and display)."""
        out: dict[str, Any] = {"type": self.kind}
        names = _SHOWN.get(type(self))
        if names is None:  # once per class: dataclasses.fields() costs more than the rest of this call
            names = _SHOWN[type(self)] = tuple(f.name for f in fields(self) if f.name not in _HIDDEN)
        for name in names:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(slots=True, kw_only=True)
class Hello(Event):
    """The agent introduces itself; `handshake` means it waits for a verdict on each tool call."""

    kind: ClassVar[str] = "hello"
    handshake: bool = False
    name: str | None = None
    protocol: int = 1


@dataclass(slots=True, kw_only=True)
class ToolCall(Event):
    kind: ClassVar[str] = "tool_call"
    tool: str
    args: dict[str, Any]
    call_id: str | None = None
    sig: int | None = field(default=None, repr=False, compare=False)  # set by the engine


@dataclass(slots=True, kw_only=True)
class ToolResult(Event):
    kind: ClassVar[str] = "tool_result"
    output: str
    tool: str | None = None
    call_id: str | None = None
    is_error: bool = False
    exit_code: int | None = None
    digest: bytes | None = field(default=None, repr=False, compare=False)  # cached by the engine
    size: int | None = None  # a streamed output's length in characters; `output` is then its first part

    @property
    def failed(self) -> bool:
        """An error flag or a non-zero exit code. (The rules that ask on every result write this out: a property
        is read through a C call that starts a new frame, ~900 instructions, where the test is ~150; a function
        costs a call as well.)"""
        return self.is_error or (self.exit_code is not None and self.exit_code != 0)


@dataclass(slots=True, kw_only=True)
class AssistantMessage(Event):
    kind: ClassVar[str] = "assistant_message"
    text: str


@dataclass(slots=True, kw_only=True)
class UserMessage(Event):
    """A human turn: it resets the repetition windows."""

    kind: ClassVar[str] = "user_message"
    text: str


@dataclass(slots=True, kw_only=True)
class SystemNudge(Event):
    """Text injected by a framework or supervisor; never counts as a human turn."""

    kind: ClassVar[str] = "system_nudge"
    text: str


@dataclass(slots=True, kw_only=True)
class Condensation(Event):
    kind: ClassVar[str] = "condensation"
    text: str | None = None


@dataclass(slots=True, kw_only=True)
class ValidationError(Event):
    """The agent could not parse its model's output, or a tool call was malformed."""

    kind: ClassVar[str] = "validation_error"
    message: str
    raw: Any = None


@dataclass(slots=True, kw_only=True)
class Error(Event):
    kind: ClassVar[str] = "error"
    message: str
    error_type: str | None = None
    location: str | None = None
    stack: str | None = None


@dataclass(slots=True, kw_only=True)
class TestResult(Event):
    __test__: ClassVar[bool] = False  # not a pytest test class
    kind: ClassVar[str] = "test_result"
    passed: int
    failed: int
    failing: list[str] | None = None
    coverage: float | None = None


@dataclass(slots=True, kw_only=True)
class Attempt(Event):
    kind: ClassVar[str] = "attempt"
    status: str
    blockers: list[str] = field(default_factory=list)
    work: list[str] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class Iteration(Event):
    kind: ClassVar[str] = "iteration"
    n: int
    status: str
    files_modified: list[str] | None = None
    failing_tests: list[str] | None = None
    error: str | None = None


@dataclass(slots=True, kw_only=True)
class Usage(Event):
    """Tokens one model call (or turn) used. `input_tokens` counts every input token, those read from a cache
    (`cache_read_tokens`) and written to one (`cache_write_tokens`) included. `cost_source` says where `cost_usd`
    came from: "agent" (its own figure, which wins) or "table" (the engine priced it from prices.py); neither
    when the model is unknown."""

    kind: ClassVar[str] = "usage"
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = None
    model: str | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_source: str | None = None


@dataclass(slots=True, kw_only=True)
class Collaboration(Event):
    kind: ClassVar[str] = "collaboration"
    from_agent: str
    to_agent: str
    request: str


@dataclass(slots=True, kw_only=True)
class GateRequest(Event):
    """The agent asks a human to approve something."""

    kind: ClassVar[str] = "gate_request"
    reason: str


@dataclass(slots=True, kw_only=True)
class Done(Event):
    kind: ClassVar[str] = "done"
    summary: str | None = None


@dataclass(slots=True, kw_only=True)
class InvalidLine(Event):
    """A line that could not become an event: a validation failure, never a crash."""

    kind: ClassVar[str] = "invalid_line"
    reason: str
    preview: str = ""


@dataclass(slots=True, kw_only=True)
class Output(Event):
    """A line a plain (non-protocol) command printed; activity, and counted against the output budget."""

    kind: ClassVar[str] = "output"
    text: str
    stream: str = "stdout"
    size: int = 0


@dataclass(slots=True, kw_only=True)
class ResourceSample(Event):
    """The process tree's resources, sampled by the shell (psutil); not activity."""

    kind: ClassVar[str] = "resources"
    cpu_percent: float
    rss: int
    processes: int
    open_files: int = 0


ATTEMPT_STATUSES = ("pending", "in_progress", "blocked", "done")
ITERATION_STATUSES = ("pass", "fail")

EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        Hello, ToolCall, ToolResult, AssistantMessage, UserMessage, SystemNudge,
        Condensation, ValidationError, Error, TestResult, Attempt, Iteration, Usage,
        Collaboration, GateRequest, Done,
    )
}


@dataclass(slots=True, frozen=True)
class SpillResult:
    """What became of one oversized output: the file (or None on fallback) and the agent's text."""

    path: str | None
    size: int
    preview: str
    message: str
    warning: str | None
    cut: int = 0  # bytes of the output not written: a spill bound met (runtime/spill_bounds.py)
    saved: bool = True  # False: none of it was written; `path` is the notice that says why
