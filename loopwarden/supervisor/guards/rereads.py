"""The same file read again and again (any offset) with no write to it."""

from __future__ import annotations

import posixpath
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from .. import messages
from ..config import Config
from ..events import Condensation, Event, ToolCall
from ..verdicts import Action, Verdict
from .base import NO_VERDICTS, BlockLedger, Counter, Observer, TypedGuard

_MAX_TRACKED: Final = 512
_PATH_KEYS: Final = ("file_path", "path", "filePath", "absolute_path", "target_file", "file", "filename", "uri")
_READ: Final = 1
_WRITE: Final = 2
_OTHER: Final = 0
_VIEW: Final = "view"  # str_replace_editor and text_editor read with command=view and write with every other command


def _path(args: dict[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = args.get(key)
        if type(value) is str and value:
            return normal_path(value.removeprefix("file://"))
    return None


def normal_path(path: str) -> str:
    """posixpath.normpath, skipped for a path it would return unchanged (most paths agents send): no empty
    component, none starting with a dot (so no '.' or '..'), no trailing slash."""
    if path and "//" not in path and "/." not in path and path[0] != "." and path[-1] != "/":
        return path
    return posixpath.normpath(path)


class _Reads:
    """One path's reads since its last write."""

    __slots__ = ("count", "fired", "last_call", "sig")

    def __init__(self) -> None:
        self.count = self.fired = self.last_call = 0
        self.sig: int | None = None


class RereadsGuard(TypedGuard):
    """Per path, reads since its last write: past `max_reads` the next read is blocked, then gated.

    The Goose fork denies the read and escalates a repeat to a user-visible stop; a write or edit of the
    path, a human turn or a condensation (the content left the context) starts its count over, and so
    does a read more than `window` tool calls after the previous one: re-reading is a loop when the
    reads come back to back, not when a file is looked at again hours later.
    """

    name = "rereads"
    handles = (ToolCall, Condensation)

    def __init__(self, config: Config, ledger: BlockLedger) -> None:
        self.ledger = ledger  # a call the repetition rules already blocked is not blocked twice
        self.reads: OrderedDict[str, _Reads] = OrderedDict()
        self.calls = 0
        self.configure(config)

    def configure(self, config: Config) -> None:
        cfg = config.rereads
        self.limit = cfg.max_reads
        self.window = cfg.window
        self.read_tools = frozenset(t.lower() for t in cfg.read_tools)
        self.write_tools = frozenset(t.lower() for t in cfg.write_tools)
        self.kinds: dict[str, int] = {}  # tool name -> read, write or other, worked out once per name

    def _kind(self, tool: str) -> int:
        name = tool.lower().rpartition("__")[2]  # an MCP server's prefix (developer__text_editor)
        kind = _READ if name in self.read_tools else _WRITE if name in self.write_tools else _OTHER
        if len(self.kinds) < _MAX_TRACKED:
            self.kinds[tool] = kind
        return kind

    def hook(self, kind: type[Event]) -> Observer | None:
        return self._condensed if kind is Condensation else self._call

    def _condensed(self, event: Event, now: float) -> Sequence[Verdict]:
        self.reads.clear()
        return NO_VERDICTS

    def _call(self, call: ToolCall, now: float) -> Sequence[Verdict]:
        self.calls += 1
        kind = self.kinds.get(call.tool)
        if kind is None:
            kind = self._kind(call.tool)
        if kind == _OTHER:
            return NO_VERDICTS
        is_write = kind == _WRITE
        path = _path(call.args)
        if path is None:
            return NO_VERDICTS
        if is_write and call.args.get("command") == _VIEW:
            is_write = False
        if is_write:
            self.reads.pop(path, None)
            return NO_VERDICTS
        if self.ledger.blocked_seq == call.seq:
            return NO_VERDICTS  # blocked by a repetition rule: it does not run, so it is no read
        entry = self.reads.get(path)
        if entry is None:
            entry = self.reads[path] = _Reads()
            if len(self.reads) > _MAX_TRACKED:
                self.reads.popitem(last=False)
        else:
            self.reads.move_to_end(path)
            if self.window and self.calls - entry.last_call > self.window:
                entry.count = entry.fired = 0  # the previous read is long past
            elif call.sig == entry.sig:
                entry.last_call = self.calls
                return NO_VERDICTS  # the very same read again: the repetition rule's to judge
        entry.count += 1
        entry.last_call, entry.sig = self.calls, call.sig
        reads = entry.count - 1
        if not self.limit or reads < self.limit:
            return NO_VERDICTS
        entry.fired += 1
        evidence = {"tool": call.tool, "path": messages.clip(path, 200), "reads": reads,
                    "args": messages.show_args(call.args)}
        if entry.fired == 1:
            return (Verdict(Action.BLOCK, self.name, f"{path} read {reads}x without a write",
                            message=messages.reread_block(path, reads), evidence=evidence),)
        if entry.fired == 2:
            return (Verdict(Action.GATE, self.name, f"{path} read again after a blocked re-read",
                            message=messages.reread_gate(path, reads), evidence=evidence),)
        return NO_VERDICTS

    def human_turn(self) -> None:
        self.reads.clear()

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "rereads"):
            self.reads.clear()

    def counters(self) -> list[Counter]:
        worst = max((entry.count for entry in self.reads.values()), default=0)
        return [Counter("rereads", worst, self.limit)]
