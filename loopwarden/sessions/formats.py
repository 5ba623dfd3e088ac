"""The wire formats loopwarden reads, told apart by their records: which format a recording is in from its
first lines (`loopwarden replay` without --format), and which one a live agent speaks (sessions/detect.py)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..supervisor.events import EVENT_TYPES

FORMATS = ("native", "claude-code", "codex", "codex-app-server", "acp")
HEAD_LINES = 32  # meaningful lines looked at
HEAD_BYTES = 1 << 20

# Claude Code stream-json record types (claude -p --output-format stream-json, and its control protocol)
CLAUDE_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event", "rate_limit_event",
                           "control_request", "control_response", "control_cancel_request", "keep_alive",
                           "tool_progress", "auth_status"})
CODEX_PREFIXES = ("thread.", "turn.", "item.")  # codex exec --json
_ACP_PREFIXES = ("session/", "fs/", "terminal/")
TYPE_FIELD = re.compile(rb'"type"\s*:\s*"([A-Za-z_./-]{1,64})"')  # a record's type in text that does not decode


def record_formats(obj: Any) -> frozenset[str]:
    """The formats one decoded record could belong to; empty when it fits none."""
    if not isinstance(obj, dict):
        return frozenset()
    kind = obj.get("type")
    if isinstance(kind, str):
        return frozenset(f for f, fits in (
            ("native", kind in EVENT_TYPES),
            ("claude-code", kind in CLAUDE_TYPES),
            ("codex", kind.startswith(CODEX_PREFIXES) or kind == "error"),  # `error` is native's too
        ) if fits)
    method = obj.get("method")
    # ACP is JSON-RPC with its header; the Codex app-server leaves the header out
    if "jsonrpc" in obj or (isinstance(method, str) and method.startswith(_ACP_PREFIXES)):
        return frozenset({"acp"})
    if isinstance(method, str) or ("id" in obj and ("result" in obj or "error" in obj)):
        return frozenset({"codex-app-server"})
    return frozenset()


@dataclass(frozen=True)
class Guess:
    """What the first lines of a recording look like."""

    fmt: str | None  # the likeliest format; None when no line fits any
    fits: Counter[str] = field(default_factory=Counter)  # format -> head lines it fits
    array: bool = False  # one JSON array of records (claude-code-action's fixtures), not JSON lines

    def fits_any(self, fmt: str) -> bool:
        return self.fits[fmt] > 0


def guess_format(head: bytes, *, complete: bool) -> Guess:
    """The likeliest format of a recording from its first bytes (`complete`: the head is the whole input)."""
    if _is_array(head):  # only claude-code reads an array; the types inside name its records' kinds
        claude = sum("claude-code" in record_formats({"type": t.decode()}) for t in TYPE_FIELD.findall(head))
        return _guess([frozenset({"claude-code"})] * claude, array=True)
    lines = head.split(b"\n")
    if not complete:
        lines.pop()  # cut mid-line
    found = []
    for line in lines:
        if not line.strip():
            continue
        try:
            found.append(record_formats(orjson.loads(line)))
        except orjson.JSONDecodeError:
            found.append(frozenset())
        if len(found) == HEAD_LINES:
            break
    return _guess(found, array=False)


def _guess(found: list[frozenset[str]], *, array: bool) -> Guess:
    fits = Counter(f for formats in found for f in formats)
    decisive = Counter(next(iter(formats)) for formats in found if len(formats) == 1)
    votes = decisive or fits
    fmt = max(votes, key=lambda f: (votes[f], -FORMATS.index(f))) if votes else None
    return Guess(fmt, fits, array)


def _is_array(head: bytes) -> bool:
    """A JSON array of records, over many lines or on one; not a JSON-lines record such as `[1, 2]`."""
    start = head.lstrip()
    if start[:1] != b"[":
        return False
    try:
        first = orjson.loads(start.split(b"\n", 1)[0])
    except orjson.JSONDecodeError:
        return True  # the array goes on over more lines
    return bool(first) and isinstance(first, list) and all(isinstance(r, dict) for r in first)
