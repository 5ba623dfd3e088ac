"""The bounds every stage honours on what an agent sends: nesting depth, and the sizes that go with it.

Every parser (the native protocol, recorded and launched Claude Code, Codex, hook events) accepts a
document nested at most MAX_DEPTH levels deep, its own outer object counted as level 1. The engine,
the store, the broadcast and the console then never see deeper data; as a net, the store and the
broadcast still cut any record to MAX_RECORD_DEPTH, the deepest that orjson (which reads 1024 levels
but writes only 254) can still write inside the envelope of a reply. Standard library only: the hook
client imports it.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .lines import DEFAULT_MAX_LINE_BYTES, RECORDED_MAX_LINE_BYTES

__all__ = ["CUT_MARKER", "DEFAULT_MAX_LINE_BYTES", "MAX_DEPTH", "MAX_HOOK_INPUT_BYTES", "MAX_RECORD_DEPTH",
           "MAX_REQUEST_BYTES", "RECORDED_MAX_LINE_BYTES", "REPLY_ENVELOPE", "TOO_DEEP", "cut_deep",
           "cut_deep_json", "cut_marker", "depth_exceeds", "kept_too_deep", "may_exceed_depth"]

# 64 is the engine's canonicaliser limit, far beyond any real tool call (they nest a handful of
# levels), shallow enough that a recursive walk of it costs nothing and every serialiser takes it.
MAX_DEPTH: Final = 64
REPLY_ENVELOPE: Final = 4  # levels a `logs` reply puts around a stored record: reply, result, events, row
MAX_RECORD_DEPTH: Final = 254 - REPLY_ENVELOPE  # orjson writes 254 levels
MAX_REQUEST_BYTES: Final = DEFAULT_MAX_LINE_BYTES  # one request line to the daemon (a hook event rides in one)
MAX_HOOK_INPUT_BYTES: Final = RECORDED_MAX_LINE_BYTES  # a hook event: what Claude Code writes on one stream line
TOO_DEEP: Final = f"JSON nested too deeply (more than {MAX_DEPTH} levels)"


def cut_marker(limit: int) -> str:
    """What replaces a part nested deeper than `limit`."""
    return f"[cut by loopwarden: nested more than {limit} levels deep]"


CUT_MARKER: Final = cut_marker(MAX_DEPTH)

_CONTAINERS: Final = (dict, list, tuple)
# a JSON string (escapes included) or one bracket; a string is skipped whole, so brackets inside it never count
_JSON_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


def may_exceed_depth(line: bytes | str, limit: int = MAX_DEPTH) -> bool:
    """Whether a JSON text has enough opening brackets to nest deeper than `limit` (a cheap count)."""
    if isinstance(line, str):
        return line.count("{") + line.count("[") > limit
    return line.count(b"{") + line.count(b"[") > limit


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether objects and arrays in `value` nest deeper than `limit` (iterative: any depth is safe)."""
    if not isinstance(value, _CONTAINERS):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1))
    return False


def kept_too_deep(value: Any) -> bool:
    """Whether a kept field (`args`, `raw`, one level below the line) nests past MAX_DEPTH counting the line.

    Only these fields can hold nested data the event keeps (unknown fields are dropped), so checking
    them is the bound; a value with no container inside is shallow without a walk.
    """
    if type(value) is dict:
        items: Any = value.values()
    elif type(value) is list:
        items = value
    else:
        return False
    for item in items:
        if type(item) is dict or type(item) is list:
            return depth_exceeds(value, MAX_DEPTH - 1)
    return False


def cut_deep(value: Any, limit: int = MAX_DEPTH) -> Any:
    """A copy of `value` whose objects and arrays below level `limit` are replaced by `cut_marker(limit)`."""
    return _cut(value, 1, limit, cut_marker(limit))


def _cut(value: Any, depth: int, limit: int, marker: str) -> Any:
    if isinstance(value, dict):
        if depth > limit:
            return marker
        return {key: _cut(item, depth + 1, limit, marker) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        if depth > limit:
            return marker
        return [_cut(item, depth + 1, limit, marker) for item in value]
    return value


def cut_deep_json(data: bytes, limit: int = MAX_DEPTH) -> bytes:
    """JSON text with every object or array below level `limit` replaced by `cut_marker(limit)` and a digest.

    For text a JSON parser cannot take at all (Python's json stops near 1000 levels, orjson at 1024).
    The digest keeps two inputs that differ only below the cut two different calls to the engine.
    Text that is not JSON stays invalid (an unclosed deep container is dropped), for the parser to reject.
    """
    import hashlib  # only here: the hook client's start-up stays small

    marker = cut_marker(limit)[:-1]
    out: list[bytes] = []
    kept = 0  # data[:kept] is already in `out` (or dropped)
    depth = 0
    cut_from = -1  # where the container being dropped starts
    for match in _JSON_TOKEN.finditer(data):
        token = match.group()
        if token[0] == 0x22:  # a string
            continue
        if token in (b"{", b"["):
            depth += 1
            if depth == limit + 1:
                cut_from = match.start()
        elif depth:
            depth -= 1
            if depth == limit and cut_from >= 0:
                digest = hashlib.blake2b(data[cut_from:match.end()], digest_size=8).hexdigest()
                out += (data[kept:cut_from], f'"{marker}; digest {digest}]"'.encode())
                kept, cut_from = match.end(), -1
    out.append(data[kept:] if cut_from < 0 else data[kept:cut_from])
    return b"".join(out)
