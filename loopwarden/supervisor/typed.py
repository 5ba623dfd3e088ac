"""Typed decoding of native-protocol lines: the fast path, in C through msgspec.

A line whose fields are exactly the protocol's, each of its kind, decodes in one pass into a typed
record that becomes its Event. Anything else (an unknown field, a wrong kind, a bad enum value, non-ASCII
text that is not UTF-8, arguments nested too deep) returns None, and `protocol.parse_line` takes the
careful path that explains the failure; so both paths give the same event for every line. `args` and a
validation_error's `raw` are free JSON, decoded by orjson and bounded in depth as before (orjson reads
numbers past 64 bits as floats, msgspec as ints: the signature of a call must not change).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Annotated, Any, Literal

import msgspec
import orjson

from . import events as ev
from .bounds import kept_too_deep

# orjson reads integers from -2**63 to 2**64 - 1 (past them it gives a float, which the careful path rejects);
# msgspec's bounds stop at 2**63 - 1, so the few above go the careful way
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]  # a usage's: never negative (it would lower the spend)

# Every record forbids unknown fields: msgspec skips them without checking what orjson checks (UTF-8, numbers
# that overflow a double), so a line with one goes the careful way. Records hold only strings, numbers, lists of
# strings and raw JSON, never themselves: they cannot be part of a reference cycle, so the garbage collector
# need not track them (gc=False: one tracked allocation fewer per line, fewer collections). Encoded
# (`stored_json`), a record leaves out the fields at their defaults: the None ones, which `Event.to_dict` leaves
# out too. `seq` is the event's, set just before the record is encoded, so that the encoding holds it (the careful
# path ignores a line's own "seq", and so does every builder: any int a line gives there is overwritten).


class _Common(msgspec.Struct, tag_field="type", forbid_unknown_fields=True, kw_only=True, omit_defaults=True,
              gc=False):
    ts: float | None = None
    task: str | None = None
    agent: str | None = None
    seq: int = -1  # (no event's: the default is left out of the encoding)


class _Hello(_Common, tag="hello"):
    handshake: bool = False
    name: str | None = None
    protocol: _Int = 1


class _ToolCall(_Common, tag="tool_call"):
    tool: str
    args: msgspec.Raw
    call_id: str | None = None


class _ToolResult(_Common, tag="tool_result"):
    output: str
    tool: str | None = None
    call_id: str | None = None
    is_error: bool = False
    exit_code: _Int | None = None


class _AssistantMessage(_Common, tag="assistant_message"):
    text: str


class _UserMessage(_Common, tag="user_message"):
    text: str


class _SystemNudge(_Common, tag="system_nudge"):
    text: str


class _Condensation(_Common, tag="condensation"):
    text: str | None = None


class _ValidationError(_Common, tag="validation_error"):
    message: str
    raw: msgspec.Raw | None = None


class _Error(_Common, tag="error"):
    message: str
    error_type: str | None = None
    location: str | None = None
    stack: str | None = None


class _TestResult(_Common, tag="test_result"):
    passed: _Int
    failed: _Int
    failing: list[str] | None = None
    coverage: _Int | float | None = None  # an int stays an int, as orjson reads it


class _Attempt(_Common, tag="attempt"):
    task: str  # required on an attempt
    status: Literal["pending", "in_progress", "blocked", "done"]
    blockers: list[str] | None = None
    work: list[str] | None = None


class _Iteration(_Common, tag="iteration"):
    n: _Int
    status: Literal["pass", "fail"]
    files_modified: list[str] | None = None
    failing_tests: list[str] | None = None
    error: str | None = None


class _Usage(_Common, tag="usage"):
    input_tokens: _Count
    output_tokens: _Count
    cost_usd: _Count | Annotated[float, msgspec.Meta(ge=0)] | None = None
    model: str | None = None
    cache_read_tokens: _Count | None = None
    cache_write_tokens: _Count | None = None


class _Collaboration(_Common, tag="collaboration"):
    from_agent: str
    to_agent: str
    request: str


class _GateRequest(_Common, tag="gate_request"):
    reason: str


class _Done(_Common, tag="done"):
    summary: str | None = None


_Record = (_Hello | _ToolCall | _ToolResult | _AssistantMessage | _UserMessage | _SystemNudge | _Condensation
           | _ValidationError | _Error | _TestResult | _Attempt | _Iteration | _Usage | _Collaboration
           | _GateRequest | _Done)
_decode_record = msgspec.json.Decoder(_Record).decode


# An event class called with keywords packs them into a dict that its __init__ then unpacks again (a class has no
# vectorcall of its own in CPython 3.11). The builders make each event with __new__ and store its fields one by one:
# no frame for __init__, no keyword matching (that was a fifth of the input stage: ~30 bytecodes and 1,000
# instructions of argument binding per line).
_new = object.__new__


def _maker(cls: type[ev.Event], record: type[_Common], *extra: str, **given: str) -> Callable[..., ev.Event]:
    """`make(r, seq, *extra)`: a `cls` event with every field of the class stored, as its __init__ would: `seq`,
    a field named in `given` from that expression, one the record has from the record (`r.name`), any other at its
    default (a fresh value from a default factory). Written out once per class: a field added to an event class
    is never left unset."""
    assert not hasattr(cls, "__post_init__"), f"{cls.__name__}.__post_init__ would be skipped"
    lines = [f"def make(r, seq{''.join(', ' + name for name in extra)}):", "    event = _new(cls)"]
    names: dict[str, Any] = {"_new": _new, "cls": cls}
    for f in fields(cls):
        if f.name == "seq":
            value = "seq"
        elif f.name in given:
            value = given[f.name]
        elif f.name in record.__struct_fields__:
            value = f"r.{f.name}"
        elif f.default_factory is not MISSING:
            names[f"_{f.name}_factory"] = f.default_factory
            value = f"_{f.name}_factory()"
        else:
            assert f.default is not MISSING, f"{cls.__name__}.{f.name} has no value"
            names[f"_{f.name}_default"] = f.default
            value = f"_{f.name}_default"
        lines.append(f"    event.{f.name} = {value}")
    lines.append("    return event")
    exec("\n".join(lines), names)  # the source above, made of field names only
    return names["make"]  # type: ignore[no-any-return]


_make_hello = _maker(ev.Hello, _Hello)


def _hello(r: Any, seq: int) -> ev.Event | None:
    if r.protocol != 1:
        return None  # the careful path names the version
    return _make_hello(r, seq)


_make_call = _maker(ev.ToolCall, _ToolCall, "args", args="args")


def _tool_call(r: Any, seq: int) -> ev.Event | None:
    if not r.tool:
        return None
    args = orjson.loads(memoryview(r.args))
    if type(args) is not dict or kept_too_deep(args):
        return None
    return _make_call(r, seq, args)


_make_validation_error = _maker(ev.ValidationError, _ValidationError, "raw", raw="raw")


def _validation_error(r: Any, seq: int) -> ev.Event | None:
    raw = None if r.raw is None else orjson.loads(memoryview(r.raw))
    if kept_too_deep(raw):
        return None
    return _make_validation_error(r, seq, raw)


# The rest are made from their records alone, each field named outright (a dict of keywords per line, as from
# msgspec.structs.asdict, costs three times as much): an attempt's absent lists are empty ones.
_BUILD: dict[type[_Common], Callable[[Any, int], ev.Event | None]] = {
    _Hello: _hello,
    _ToolCall: _tool_call,
    _ToolResult: _maker(ev.ToolResult, _ToolResult),
    _AssistantMessage: _maker(ev.AssistantMessage, _AssistantMessage),
    _UserMessage: _maker(ev.UserMessage, _UserMessage),
    _SystemNudge: _maker(ev.SystemNudge, _SystemNudge),
    _Condensation: _maker(ev.Condensation, _Condensation),
    _ValidationError: _validation_error,
    _Error: _maker(ev.Error, _Error),
    _TestResult: _maker(ev.TestResult, _TestResult),
    _Attempt: _maker(ev.Attempt, _Attempt, blockers="r.blockers if r.blockers is not None else []",
                     work="r.work if r.work is not None else []"),
    _Iteration: _maker(ev.Iteration, _Iteration),
    _Usage: _maker(ev.Usage, _Usage),
    _Collaboration: _maker(ev.Collaboration, _Collaboration),
    _GateRequest: _maker(ev.GateRequest, _GateRequest),
    _Done: _maker(ev.Done, _Done),
}


# What a line the careful path must judge raises here: msgspec.DecodeError; UnicodeDecodeError (a ValueError)
# for bad UTF-8; RecursionError, msgspec's own bound on nesting; orjson.JSONDecodeError (a ValueError) in
# `args` or `raw`. The builders raise nothing else.
REFUSED = (msgspec.DecodeError, ValueError, RecursionError)
decode_record = _decode_record  # `EVENT_OF[type(record)](record, seq)` on it, catching REFUSED: typed_line.py
EVENT_OF = _BUILD


_encode = msgspec.json.Encoder().encode
# records whose event has a field at a default other than None, which `to_dict` shows and the encoding leaves out
# (a result's is_error is added by hand), or free JSON not read by msgspec (a validation error's raw); a usage the
# engine gave a cost source (`cost_source`, no field of the record) is not either
_NOT_ENCODED = frozenset({_Hello, _Attempt, _ValidationError})
_NO_ERROR = b',"is_error":false}'


def stored_json(record: Any, event: ev.Event) -> bytes | None:
    """`event.to_dict()` with its `seq`, as JSON, encoded from the record it was built from (one C call instead
    of the dict and its encoding); None for the kinds it cannot be. The event must be the record's own,
    unchanged since (`EVENT_OF`): a call's arguments are the event's, as orjson read them."""
    kind = type(record)
    if kind is _ToolCall:
        record.args = event.args  # type: ignore[attr-defined]  # orjson's reading of the raw arguments
    elif kind in _NOT_ENCODED or (kind is _Usage and event.cost_source is not None):  # type: ignore[attr-defined]
        return None
    record.seq = event.seq
    try:
        text = _encode(record)
    except (msgspec.EncodeError, ValueError, TypeError, OverflowError):  # nothing orjson read should be refused
        return None
    if kind is _ToolResult and not record.is_error:
        return text[:-1] + _NO_ERROR
    return text


