"""The native protocol, v1: one JSON object per line, validated into an Event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from . import events as ev
from .bounds import TOO_DEEP, depth_exceeds, kept_too_deep, may_exceed_depth
from .typed_line import typed_event

PROTOCOL_VERSION = 1
PREVIEW_CHARS = 120

# Field kinds: what a value must be, and how it is described in an error.
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "text": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "num": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "a number",
    ),
    "obj": (lambda v: isinstance(v, dict), "an object"),
    "strlist": (
        lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "a list of strings",
    ),
    "any": (lambda v: True, "any value"),
}

# type -> [(field, kind, required)]
FIELDS: dict[str, list[tuple[str, str, bool]]] = {
    "hello": [("handshake", "bool", False), ("name", "str", False), ("protocol", "int", False)],
    "tool_call": [("tool", "str", True), ("args", "obj", True), ("call_id", "str", False)],
    "tool_result": [
        ("output", "text", True), ("tool", "str", False), ("call_id", "str", False),
        ("is_error", "bool", False), ("exit_code", "int", False),
    ],
    "assistant_message": [("text", "text", True)],
    "user_message": [("text", "text", True)],
    "system_nudge": [("text", "text", True)],
    "condensation": [("text", "text", False)],
    "validation_error": [("message", "text", True), ("raw", "any", False)],
    "error": [
        ("message", "text", True), ("error_type", "str", False),
        ("location", "str", False), ("stack", "text", False),
    ],
    "test_result": [
        ("passed", "int", True), ("failed", "int", True),
        ("failing", "strlist", False), ("coverage", "num", False),
    ],
    "attempt": [
        ("task", "str", True), ("status", "str", True),
        ("blockers", "strlist", False), ("work", "strlist", False),
    ],
    "iteration": [
        ("n", "int", True), ("status", "str", True), ("files_modified", "strlist", False),
        ("failing_tests", "strlist", False), ("error", "text", False),
    ],
    "usage": [
        ("input_tokens", "int", True), ("output_tokens", "int", True), ("cost_usd", "num", False),
        ("model", "str", False), ("cache_read_tokens", "int", False), ("cache_write_tokens", "int", False),
    ],
    "collaboration": [("from_agent", "str", True), ("to_agent", "str", True), ("request", "text", True)],
    "gate_request": [("reason", "text", True)],
    "done": [("summary", "text", False)],
}

_ENUMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("attempt", "status"): ev.ATTEMPT_STATUSES,
    ("iteration", "status"): ev.ITERATION_STATUSES,
}

_COMMON = (("ts", "num"), ("task", "str"), ("agent", "str"))


class LineRejected(ValueError):
    """A line that is not a valid protocol event; the message is the short reason."""


def preview(raw: bytes | str, limit: int = PREVIEW_CHARS) -> str:
    """A short, printable excerpt of a raw line for reports."""
    if isinstance(raw, bytes):
        raw = raw[: limit * 4].decode("utf-8", "replace")
    text = raw[:limit].replace("\n", "\\n")
    return text + ("…" if len(raw) > limit else "")


def load_object(line: bytes | str) -> dict[str, Any]:
    """Parse one line as a JSON object nested at most MAX_DEPTH deep, or raise LineRejected with a short reason."""
    obj = _decode(line)
    if may_exceed_depth(line) and depth_exceeds(obj):  # the count is cheap; the walk runs only past it
        raise LineRejected(TOO_DEEP)
    return obj


def _decode(line: bytes | str) -> dict[str, Any]:
    """One line as a JSON object (orjson reads up to 1024 levels), or LineRejected."""
    if line[:3] == b"\xef\xbb\xbf" or line[:1] == "\ufeff":
        line = line[3:] if isinstance(line, bytes) else line[1:]  # a byte-order mark is noise, not an error
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise LineRejected(json_failure(str(exc))) from None
    if not isinstance(obj, dict):
        raise LineRejected(f"not a JSON object (got {type(obj).__name__})")
    return obj


def json_failure(msg: str) -> str:
    """The short reason for orjson's error message."""
    if "UTF-8" in msg or "surrogate" in msg:
        return "not valid UTF-8"
    if "depth limit" in msg or "recursion" in msg:
        return TOO_DEEP
    return f"not valid JSON ({msg.split(':', 1)[0]})"


_EXACT: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: type(v) is str,
    "text": lambda v: type(v) is str,
    "bool": lambda v: type(v) is bool,
    "int": lambda v: type(v) is int,
    "num": lambda v: type(v) is float or type(v) is int,
    "obj": lambda v: type(v) is dict,
    "strlist": lambda v: type(v) is list and all(type(x) is str for x in v),
    "any": lambda v: True,
}
# type -> (class, [(field, exact check, required, allowed values or None)])
_FAST = {
    kind: (ev.EVENT_TYPES[kind], [(name, _EXACT[k], req, _ENUMS.get((kind, name))) for name, k, req in spec])
    for kind, spec in FIELDS.items()
}


def event_from_object(obj: dict[str, Any], seq: int = 0) -> ev.Event:
    """Validate a decoded protocol object and build its Event (raises LineRejected)."""
    kind = obj.get("type")
    fast = _FAST.get(kind) if type(kind) is str else None
    if fast is not None:
        event = _fast_event(obj, seq, *fast)
        if event is not None:
            return event
    return _checked_event(obj, seq)


def _fast_event(obj: dict[str, Any], seq: int, cls: type[ev.Event],
                spec: list[tuple[str, Callable[[Any], bool], bool, tuple[str, ...] | None]]) -> ev.Event | None:
    """The common case, with exact type checks; None sends the line to the path that explains."""
    values: dict[str, Any] = {"seq": seq}
    ts = obj.get("ts")
    if ts is not None:
        if type(ts) is not float:
            if type(ts) is not int:
                return None
            ts = float(ts)
        values["ts"] = ts
    for name in ("task", "agent"):
        value = obj.get(name)
        if value is not None:
            if type(value) is not str:
                return None
            values[name] = value
    for name, check, required, allowed in spec:
        value = obj.get(name)
        if value is None:
            if required:
                return None
            continue
        if not check(value) or (allowed is not None and value not in allowed):
            return None
        values[name] = value
    if cls is ev.ToolCall and (not values["tool"] or kept_too_deep(values["args"])):
        return None
    if cls is ev.ValidationError and kept_too_deep(values.get("raw")):
        return None
    if cls is ev.Hello and values.get("protocol", PROTOCOL_VERSION) != PROTOCOL_VERSION:
        return None
    if cls is ev.Usage and _negative(values):
        return None
    return cls(**values)


def _checked_event(obj: dict[str, Any], seq: int) -> ev.Event:
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise LineRejected("missing 'type'")
    spec = FIELDS.get(kind)
    if spec is None:
        raise LineRejected(f"unknown type {kind[:40]!r}")
    values: dict[str, Any] = {"seq": seq}
    for name, kind_name in _COMMON:
        value = obj.get(name)
        if value is not None:
            check, desc = _KINDS[kind_name]
            if not check(value):
                raise LineRejected(f"{kind}: '{name}' must be {desc}")
            values[name] = float(value) if name == "ts" else value
    for name, kind_name, required in spec:
        value = obj.get(name)
        if value is None:
            if required:
                raise LineRejected(f"{kind}: missing required field '{name}'")
            continue
        check, desc = _KINDS[kind_name]
        if not check(value):
            raise LineRejected(f"{kind}: '{name}' must be {desc}")
        allowed = _ENUMS.get((kind, name))
        if allowed is not None and value not in allowed:
            raise LineRejected(f"{kind}: '{name}' must be one of {', '.join(allowed)}")
        values[name] = value
    if kind == "tool_call" and not values["tool"]:
        raise LineRejected("tool_call: 'tool' must not be empty")
    if kept_too_deep(values.get("args")) or kept_too_deep(values.get("raw")):
        raise LineRejected(TOO_DEEP)
    if kind == "hello" and values.get("protocol", PROTOCOL_VERSION) != PROTOCOL_VERSION:
        raise LineRejected(f"hello: protocol {values['protocol']} is not supported "
                           f"(this loopwarden speaks {PROTOCOL_VERSION})")
    if kind == "usage" and _negative(values):
        raise LineRejected(f"usage: '{_negative(values)}' must not be negative")
    return ev.EVENT_TYPES[kind](**values)


_COUNTED = ("input_tokens", "output_tokens", "cost_usd", "cache_read_tokens", "cache_write_tokens")


def _negative(values: dict[str, Any]) -> str | None:
    """The first of a usage's counts below zero (an agent must not lower its own spend), or None."""
    return next((name for name in _COUNTED if (values.get(name) or 0) < 0), None)


def parse_line(line: bytes | str, seq: int = 0) -> ev.Event:
    """One native-protocol line to an Event; a bad line becomes an InvalidLine."""
    event = typed_event(line, seq)
    if event is not None:
        return event
    try:
        return event_from_object(_decode(line), seq)
    except LineRejected as exc:
        return ev.InvalidLine(seq=seq, reason=str(exc), preview=preview(line))


def dumps(event: ev.Event) -> bytes:
    """Serialise an event as one protocol line (without the newline)."""
    return orjson.dumps(event.to_dict())
