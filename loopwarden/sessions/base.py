"""The session contract: what a session can do (Capability), and what a live adapter does to provide it.

A live adapter builds the command, reads the agent's output as events, and speaks back to it. The
runtime and the console ask a session's capabilities, never its type: a key the session cannot carry
out is greyed out, and a request for it is refused in one line.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from ..supervisor.events import Event, Hello, ToolCall, ToolResult
from ..supervisor.events import SpillResult
from ..supervisor.lines import RECORDED_MAX_LINE_BYTES
from ..supervisor.verdicts import Verdict


_COLOUR = re.compile(rb"\x1b\[[0-9;]*m")  # SGR: colours and weights, presentation only
AUTO = "auto"  # the adapter a session starts with when none is named: chosen from its command or first line


class Capability(enum.Flag):
    """What a supervised session can do beyond being watched and signalled."""

    NONE = 0
    VETO = enum.auto()  # refuse a tool call before it runs
    HOLD = enum.auto()  # hold a call unanswered while a gate is open
    INJECT = enum.auto()  # send text the model reads (a nudge, guidance, authority)
    STEER = enum.auto()  # add text to the turn that is running, not only the next one
    INTERRUPT = enum.auto()  # end the running turn and keep the session
    REWIND = enum.auto()  # drop turns from the model's history
    PROCESS_GROUP = enum.auto()  # owns the agent's process group: pause, resume and kill reach all of it


@dataclass(frozen=True, slots=True)
class TypedLines:
    """How an adapter whose every line is one event reads a line on the per-line path, live and in replay.

    `read(line, seq)`: a plainly valid line's event and the record it was decoded from; None for any other line,
    which goes to the adapter's parser (`parse_stdout`, `replay_parser`) to be explained. A line read this way owes
    the agent nothing (`Adapter.replies`). `stored(record, event)`: the event's stored JSON encoded from that record
    (as `Event.to_dict` with its seq), or None to store it from the event."""

    read: Callable[[bytes, int], tuple[Event, Any] | None]
    stored: Callable[[Any, Event], bytes | None]


@dataclass(frozen=True, slots=True)
class Handover:
    """The agent's own interactive program on a conversation, for an operator's terminal (`loopwarden takeover`):
    its words, and the environment variables it needs on top of the operator's."""

    argv: list[str]
    env: dict[str, str]


def capability_names(caps: Capability) -> list[str]:
    """Lower-case names in declaration order, for snapshots, `loopwarden adapters` and the console."""
    return [c.name.lower() for c in Capability if c and c.name and c in caps]


class Adapter:
    """Defaults: observe only, no way to talk back."""

    name = "adapter"
    listed: ClassVar[int] = 100  # a built-in's place in lists (`loopwarden adapters`, the choices): by meaning
    agent = "any"  # the kind of agent it speaks to, shown beside each session
    ladder: ClassVar[tuple[str, ...]] = ()  # its models to escalate through, cheapest first (supervisor/ladders.py)
    summary = "observe only"  # one line for `loopwarden adapters`
    declared: ClassVar[Capability] = Capability.NONE  # the most it can do (some need the agent's consent)
    stop_grace = 0.0  # seconds the agent gets to exit by itself after its stop line, before SIGTERM
    line_bytes: ClassVar[int] = RECORDED_MAX_LINE_BYTES  # the longest line read when limits.max_line_bytes is 0
    typed_lines: ClassVar[TypedLines | None] = None  # lines read without a parser (see TypedLines)
    streams_outputs: ClassVar[bool] = False  # a long tool output is read in chunks as it comes (supervisor/longline.py)
    replay_format: ClassVar[str | None] = None  # the recorded format it reads, by name (`loopwarden replay --format`)
    reads_arrays: ClassVar[bool] = False  # a recording may also be one JSON array of records (`array_events`)
    # its agent may be held by the keeper and taken up by a later daemon: all it remembers of the agent comes back
    # from the session's stored events (`taken_up`)
    keepable: ClassVar[bool] = False
    resumes: ClassVar[bool] = False  # continues its agent's own conversation by id (`resume`, `loopwarden continue`)

    def __init__(self) -> None:
        self.handshake = False
        self.failure: str | None = None  # why the agent's work failed though its process exits 0 (its model died)
        self.cwd: str | None = None  # the session's working directory, set by the runtime before start_lines
        self.conversation: str | None = None  # the agent's own conversation id, as its protocol reported it
        self.resume_state: str | None = None  # a continue's resume: "waiting" for the agent, "accepted", "refused"
        # the agent's subscription quota where its protocol reports one (Codex's rate limits): {"plan": ...,
        # "windows": [{"name", "used_percent", "window_minutes", "resets_at"}]}, shown by `status` and the console
        self.quota: dict[str, Any] | None = None

    def ladder_of(self, command: list[str], env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
        """The agent `command` starts, as `escalation.ladders` names it, and the ladder it brings."""
        return self.agent, self.ladder

    @property
    def can_veto(self) -> bool:
        """Whether a block verdict stops the call before it runs."""
        return self.handshake

    @property
    def can_inject(self) -> bool:
        return False

    @property
    def capabilities(self) -> Capability:
        """What this adapter can do now (a native agent vetoes only once it announced the handshake)."""
        caps = Capability.NONE
        if self.can_veto:
            caps |= Capability.VETO | Capability.HOLD
        if self.can_inject:
            caps |= Capability.INJECT
        return caps & self.declared

    @classmethod
    def launch_command(cls, words: list[str], env: dict[str, str] | None = None) -> list[str]:
        """The session command from what the user typed after `--`. Raises ValueError (one line) when unusable."""
        if not words:
            raise ValueError("no command given; put it after --, e.g. loopwarden run -- python agent.py")
        return list(words)

    @classmethod
    def launch_env(cls, command: list[str], env: dict[str, str], cwd: str) -> dict[str, str]:
        """Environment variables to add for `command` (launch_command's result) on top of the user's `env`,
        started in `cwd`; `loopwarden run` and the console's launch dialog add them to the session's spec."""
        return {}

    @classmethod
    def waits_for_client(cls, argv: list[str], env: Mapping[str, str]) -> str | None:
        """Why `argv` starts this adapter's agent, one that waits for its client to speak first (so `auto` takes
        this adapter at launch instead of waiting for a first line that never comes); None when it does not."""
        return None

    @classmethod
    def known_agents(cls) -> list[str]:
        """Agents it starts by name alone (`loopwarden run --agent NAME -- PROMPT`, the console's launch dialog)."""
        return []

    @classmethod
    def agent_words(cls, name: str, prompt: list[str], env: Mapping[str, str], cwd: str) -> list[str]:
        """The words `launch_command` takes to start the known agent `name` with `prompt`, in `cwd`. Raises
        ValueError (one line) when it cannot be found."""
        raise ValueError(f"the {cls.name} adapter knows no agent {name!r}")

    def command(self, argv: list[str]) -> list[str]:
        return list(argv)

    def start_lines(self) -> list[bytes]:
        """Lines to write to stdin once the process runs."""
        return []

    def parse_stdout(self, line: bytes, seq: int) -> list[Event]:
        raise NotImplementedError

    def parsed(self, event: Event, raw: bytes) -> list[Event]:
        """The events of a line read as `event` from `raw` (its typed lines' hello, a long line's first part)."""
        return [event]

    @classmethod
    def replay_parser(cls) -> Callable[[bytes, int], list[Event]]:
        """A parser for one recording in `replay_format`: one line to its events (an adapter with a format)."""
        raise NotImplementedError(f"the {cls.name} adapter reads no recording")

    @classmethod
    def array_events(cls, data: bytes) -> Iterator[list[Event]]:
        """Each record's events of a recording that is one JSON array (`data`, whole), in order; an array that
        cannot be read is one record whose event says why (an adapter that `reads_arrays`)."""
        raise NotImplementedError(f"the {cls.name} adapter reads no JSON array")

    def parse_stderr(self, line: bytes, seq: int) -> list[Event]:
        """stderr is logged, not judged, unless an adapter says otherwise."""
        return []

    def stderr_text(self, line: bytes) -> str:
        """An stderr line for the log: colour codes dropped (Codex colours its logs even into a pipe, and they
        would show escaped); every other control sequence is kept, to be shown escaped."""
        return _COLOUR.sub(b"", line).decode("utf-8", "replace")

    def hello_reply(self, hello: Hello, session: str, spill_threshold: int) -> bytes | None:
        return None

    def verdict_line(self, call: ToolCall, verdict: Verdict | None) -> bytes | None:
        return None

    def spill_line(self, result: ToolResult, spill: SpillResult) -> bytes | None:
        return None

    def inject_line(self, text: str, kind: str, rule: str, model: str | None = None) -> bytes | None:
        return None

    def oversized_reply(self, head: bytes, length: int, seq: int, limit: int) -> bytes | None:
        """What to tell an agent whose line was too long to read (None: nothing)."""
        return None

    def stop_line(self, reason: str, message: str) -> bytes | None:
        return None

    def rewind_line(self, turns: int, text: str) -> bytes:
        """Drop the last `turns` turns from the model's history and retry the first of them with `text` added
        (an adapter with REWIND). Raises ValueError (one line) when it cannot now."""
        raise ValueError(f"the {self.name} adapter cannot rewind a conversation")

    def preface(self, text: str) -> bool:
        """Give a new run `text` as its first message (a restart's summary); False when this agent cannot take one."""
        return False

    def resume(self, conversation: str, note: str) -> None:
        """Make this run continue the agent's conversation `conversation`, `note` its next user message (called
        before `command`). Raises ValueError (one line) when this adapter cannot."""
        raise ValueError(f"the {self.name} adapter cannot continue an agent's own conversation")

    @classmethod
    def handover(cls, command: list[str], conversation: str, cwd: str, env: Mapping[str, str]) -> Handover:
        """The agent's interactive program on `conversation` for a session launched as `command` in `cwd`, its
        first-run questions answered in the operator's own files (merged into them, never replacing them), so it
        opens straight on the conversation. Raises ValueError (one line) when this agent has none."""
        raise ValueError(f"the {cls.name} adapter has no interactive program to take a conversation over in")

    def spent_before(self, usd: float) -> None:
        """A continued run's conversation cost `usd` in the earlier runs (called after `resume`): an agent whose
        reported running cost includes them counts this run's from there."""

    def resume_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Environment variables a resumed run adds on top of `launch_env`'s (what keeps the agent from losing
        the conversation it resumed); after `command`."""
        return {}

    def resume_not_before(self, ended_at: float) -> float:
        """The earliest time (epoch seconds) a resume of a conversation whose run ended at `ended_at` may start
        (an agent that would lose a conversation resumed too soon); after `command`."""
        return 0.0

    def replies(self, gated: bool) -> list[bytes]:
        """Lines owed to the agent after a line was read or a gate decided (b"" closes its stdin)."""
        return []

    def taken_up(self, first: list[Event]) -> None:
        """A later daemon supervises the agent again (`keepable`): what this adapter learned from the session's
        first stored events, learned again."""

    def memory(self) -> dict[str, Any] | None:
        """What this adapter knows of a kept agent that its stored events do not say (the conversation, the ids of
        requests still waiting for an answer, the ids it gave out, where the protocol stands), as JSON values of a
        few KiB at most; stored with each position of its output, after the lines it parsed so far."""
        return None

    def recall(self, memory: dict[str, Any], held: set[int]) -> None:
        """A later daemon takes a kept agent up: `memory` is what `memory()` returned at the last stored position,
        read back from the store (values of the wrong type must be tolerated), and `held` the seqs of the calls a
        pending gate still holds; every other request read before that position, or in the lines `reread` is
        given next, was answered already."""

    def reread(self, raw: bytes, seq: int) -> None:
        """A stdout line the earlier daemon judged and stored after `memory` was taken, read again (in order, after
        `recall`) for what it tells the adapter: its events are not judged again, and what it owed was sent then."""
        self.parse_stdout(raw, seq)
        self.replies(True)


def line(obj: dict[str, Any]) -> bytes:
    """One JSON line for the agent's stdin."""
    return orjson.dumps(obj) + b"\n"

