"""The JSON Schema, the validator (protocol.py) and docs/protocol.md must agree."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from loopwarden.supervisor import events as ev
from loopwarden.supervisor import protocol, typed
from loopwarden.supervisor.bounds import MAX_DEPTH, TOO_DEEP
from loopwarden.supervisor.lines import Oversized, read_lines
from tests.support.paths import ROOT

SCHEMA_PATH = ROOT / "loopwarden" / "schema" / "native-v1.json"
DOC_PATH = ROOT / "docs" / "protocol.md"

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)

I64_MIN = -(2**63)
U64_MAX = 2**64 - 1


def schema_accepts(line: str | bytes) -> bool:
    return VALIDATOR.is_valid(json.loads(line))


def parser_accepts(line: str | bytes) -> bool:
    return not isinstance(protocol.parse_line(line), ev.InvalidLine)


# --- (a) the schema itself ---------------------------------------------------------


def test_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"] and SCHEMA["title"]
    assert SCHEMA["additionalProperties"] is True


def test_schema_mirrors_fields_table() -> None:
    """One branch per protocol type, with the same required fields and field names."""
    defs = SCHEMA["$defs"]
    assert set(defs) == set(protocol.FIELDS) == set(ev.EVENT_TYPES)
    assert SCHEMA["properties"]["type"]["enum"] == list(protocol.FIELDS)
    assert [b["$ref"] for b in SCHEMA["oneOf"]] == [f"#/$defs/{t}" for t in protocol.FIELDS]
    for kind, spec in protocol.FIELDS.items():
        branch = defs[kind]
        assert branch["properties"]["type"] == {"const": kind}
        assert branch["description"], kind
        assert branch["additionalProperties"] is True
        assert set(branch["required"]) == {"type"} | {n for n, _, req in spec if req}, kind
        assert set(branch["properties"]) == {"type"} | {n for n, _, _ in spec}, kind
        for name, _, _ in spec:
            assert branch["properties"][name].get("description"), (kind, name)
    for (kind, name), allowed in protocol._ENUMS.items():
        assert defs[kind]["properties"][name]["enum"] == list(allowed)


# --- (b) good and bad lines: schema and validator agree ----------------------------

# (id, line, None if valid else a substring of parse_line's reason)
AGREEMENT: list[tuple[str, str, str | None]] = [
    # every type, minimal and full
    ("hello-min", '{"type":"hello"}', None),
    ("hello-full", '{"type":"hello","handshake":true,"name":"a","protocol":1}', None),
    ("tool_call", '{"type":"tool_call","tool":"bash","args":{"command":"ls"},"call_id":"c1"}', None),
    ("tool_result-min", '{"type":"tool_result","output":""}', None),
    ("tool_result-full",
     '{"type":"tool_result","output":"x","tool":"bash","call_id":"c1","is_error":true,"exit_code":-1}', None),
    ("assistant_message", '{"type":"assistant_message","text":"hi"}', None),
    ("user_message", '{"type":"user_message","text":"stop"}', None),
    ("system_nudge", '{"type":"system_nudge","text":"try again"}', None),
    ("condensation-empty", '{"type":"condensation"}', None),
    ("validation_error-raw-object", '{"type":"validation_error","message":"m","raw":{"a":[1,null]}}', None),
    ("error-full", '{"type":"error","message":"m","error_type":"E","location":"a.py:1","stack":"s"}', None),
    ("test_result", '{"type":"test_result","passed":3,"failed":0,"failing":[],"coverage":91}', None),
    ("attempt", '{"type":"attempt","task":"T1","status":"in_progress","blockers":["b"],"work":[]}', None),
    ("iteration", '{"type":"iteration","n":1,"status":"pass","files_modified":["a"],"error":"e"}', None),
    ("usage", '{"type":"usage","input_tokens":10,"output_tokens":2,"cost_usd":0.5}', None),
    ("collaboration", '{"type":"collaboration","from_agent":"a","to_agent":"b","request":"r"}', None),
    ("gate_request", '{"type":"gate_request","reason":"drop table"}', None),
    ("done-min", '{"type":"done"}', None),
    # common fields, extras, null-as-absent, ranges
    ("common-fields", '{"type":"done","ts":1700000000,"task":"T","agent":"a","summary":"s"}', None),
    ("extra-fields-ignored", '{"type":"done","mine":{"x":1},"exit_code":"not checked here"}', None),
    ("null-optional", '{"type":"tool_call","tool":"t","args":{},"call_id":null,"ts":null}', None),
    ("int-u64-max", '{"type":"usage","input_tokens":18446744073709551615,"output_tokens":0}', None),
    ("int-i64-min", '{"type":"iteration","n":-9223372036854775808,"status":"pass"}', None),
    ("whitespace-inside", ' { "type" : "done" } ', None),
    # not an object
    ("array", '["tool_call"]', "not a JSON object"),
    ("string", '"hello"', "not a JSON object"),
    ("number", "42", "not a JSON object"),
    ("null", "null", "not a JSON object"),
    # type
    ("no-type", '{"tool":"bash"}', "missing 'type'"),
    ("type-null", '{"type":null}', "missing 'type'"),
    ("type-not-string", '{"type":7}', "missing 'type'"),
    ("unknown-type", '{"type":"thinking"}', "unknown type 'thinking'"),
    ("internal-type", '{"type":"invalid_line","reason":"r"}', "unknown type"),
    # missing required fields (null counts as missing)
    ("tool_call-no-args", '{"type":"tool_call","tool":"bash"}', "missing required field 'args'"),
    ("tool_call-tool-null", '{"type":"tool_call","tool":null,"args":{}}', "missing required field 'tool'"),
    ("tool_result-no-output", '{"type":"tool_result","call_id":"c1"}', "missing required field 'output'"),
    ("attempt-no-task", '{"type":"attempt","status":"done"}', "missing required field 'task'"),
    ("collaboration-no-request", '{"type":"collaboration","from_agent":"a","to_agent":"b"}', "'request'"),
    ("gate_request-no-reason", '{"type":"gate_request"}', "missing required field 'reason'"),
    ("assistant-no-text", '{"type":"assistant_message"}', "missing required field 'text'"),
    # ill-typed fields
    ("tool-empty", '{"type":"tool_call","tool":"","args":{}}', "must not be empty"),
    ("args-list", '{"type":"tool_call","tool":"t","args":["ls"]}', "'args' must be an object"),
    ("tokens-string", '{"type":"usage","input_tokens":"5","output_tokens":1}', "must be an integer"),
    ("int-bool", '{"type":"iteration","n":true,"status":"pass"}', "'n' must be an integer"),
    ("int-float", '{"type":"test_result","passed":1.5,"failed":0}', "'passed' must be an integer"),
    ("int-over-u64", '{"type":"usage","input_tokens":18446744073709551616,"output_tokens":0}', "integer"),
    ("int-under-i64", '{"type":"iteration","n":-9223372036854775809,"status":"pass"}', "integer"),
    # a usage never lowers a spend (an agent could undo its own budget)
    ("usage-cost-negative", '{"type":"usage","input_tokens":1,"output_tokens":1,"cost_usd":-1000}',
     "'cost_usd' must not be negative"),
    ("usage-tokens-negative", '{"type":"usage","input_tokens":-5,"output_tokens":1}',
     "'input_tokens' must not be negative"),
    ("usage-cache-negative", '{"type":"usage","input_tokens":5,"output_tokens":1,"cache_read_tokens":-1}',
     "'cache_read_tokens' must not be negative"),
    ("exit_code-string", '{"type":"tool_result","output":"","exit_code":"1"}', "must be an integer"),
    ("is_error-int", '{"type":"tool_result","output":"","is_error":1}', "must be true or false"),
    ("handshake-string", '{"type":"hello","handshake":"yes"}', "must be true or false"),
    ("ts-string", '{"type":"done","ts":"2024-01-01"}', "'ts' must be a number"),
    ("ts-bool", '{"type":"done","ts":true}', "'ts' must be a number"),
    ("agent-int", '{"type":"done","agent":3}', "'agent' must be a string"),
    ("coverage-bool", '{"type":"test_result","passed":1,"failed":0,"coverage":false}', "must be a number"),
    ("strlist-mixed", '{"type":"test_result","passed":1,"failed":1,"failing":["a",2]}', "a list of strings"),
    ("strlist-string", '{"type":"attempt","task":"T","status":"done","work":"all"}', "a list of strings"),
    ("text-object", '{"type":"assistant_message","text":{"t":"x"}}', "must be a string"),
    # enums
    ("attempt-bad-status", '{"type":"attempt","task":"T","status":"finished"}', "must be one of"),
    ("iteration-bad-status", '{"type":"iteration","n":1,"status":"PASS"}', "must be one of pass, fail"),
]


@pytest.mark.parametrize(("line", "reason"), [c[1:] for c in AGREEMENT], ids=[c[0] for c in AGREEMENT])
def test_schema_agrees_with_parse_line(line: str, reason: str | None) -> None:
    event = protocol.parse_line(line.encode(), seq=7)
    assert schema_accepts(line) == parser_accepts(line) == (reason is None)
    if reason is None:
        assert event.kind == json.loads(line)["type"]
        assert event.seq == 7
    else:
        assert isinstance(event, ev.InvalidLine)
        assert reason in event.reason
        assert event.seq == 7 and event.preview


def test_agreement_table_covers_every_type() -> None:
    good = {json.loads(line)["type"] for _, line, reason in AGREEMENT if reason is None}
    assert good == set(protocol.FIELDS)


# Lines a JSON Schema cannot judge: the bytes, the JSON text, or 1 vs 1.0.
SCHEMA_BLIND: list[tuple[str, bytes, str]] = [
    ("not-utf8", b'{"type":"done","summary":"\xff\xfe"}', "not valid UTF-8"),
    ("overlong-utf8", b'{"type":"done","summary":"\xc0\xaf"}', "not valid UTF-8"),
    ("lone-surrogate-escape", b'{"type":"done","summary":"\\ud800"}', "not valid UTF-8"),
    ("truncated", b'{"type":"tool_call","tool":"bash","args":{', "not valid JSON"),
    ("trailing-content", b'{"type":"done"} {"type":"done"}', "not valid JSON"),
    ("single-quotes", b"{'type':'done'}", "not valid JSON"),
    ("nan", b'{"type":"usage","input_tokens":1,"output_tokens":1,"cost_usd":NaN}', "not valid JSON"),
    ("infinity", b'{"type":"done","ts":Infinity}', "not valid JSON"),
    ("double-overflow", b'{"type":"done","ts":1e400}', "not valid JSON"),
    ("too-deep", b'{"type":"done","raw":' + b"[" * 2000 + b"]" * 2000 + b"}", "nested too deeply"),
    ("int-written-1.0", b'{"type":"usage","input_tokens":1.0,"output_tokens":1}', "must be an integer"),
    ("int-written-1e2", b'{"type":"iteration","n":1e2,"status":"pass"}', "must be an integer"),
]


@pytest.mark.parametrize(("line", "reason"), [c[1:] for c in SCHEMA_BLIND], ids=[c[0] for c in SCHEMA_BLIND])
def test_parse_line_rejects_what_the_schema_cannot_see(line: bytes, reason: str) -> None:
    event = protocol.parse_line(line, seq=3)
    assert isinstance(event, ev.InvalidLine)
    assert reason in event.reason
    assert event.seq == 3
    assert len(event.preview) <= protocol.PREVIEW_CHARS + 1


def test_over_long_line_is_a_failure_and_never_read_whole() -> None:
    limit = 64
    long_line = b'{"type":"assistant_message","text":"' + b"x" * 10_000 + b'"}'
    exact = b'{"type":"done","summary":"' + b"y" * (limit - 28) + b'"}'
    assert len(exact) == limit
    stream = io.BytesIO(b'{"type":"done"}\n\n' + long_line + b"\n" + exact + b"\n" + b'{"type":"done"}')
    got = list(read_lines(stream, max_bytes=limit))
    assert [seq for seq, _ in got] == [1, 3, 4, 5]  # the blank line 2 is skipped but counted
    over = got[1][1]
    assert isinstance(over, Oversized)
    assert over.length == len(long_line)
    assert len(over.head) <= 256 and long_line.startswith(over.head)
    assert got[2][1] == exact and parser_accepts(exact)  # exactly at the limit is fine
    assert parser_accepts(got[3][1])  # reading goes on after the long line


def test_crlf_and_whitespace_lines() -> None:
    stream = io.BytesIO(b'{"type":"done"}\r\n   \r\n\t\n{"type":"hello"}\r\n')
    got = list(read_lines(stream))
    assert [(seq, line) for seq, line in got] == [(1, b'{"type":"done"}'), (4, b'{"type":"hello"}')]


# --- (c) the examples in docs/protocol.md ------------------------------------------

_FENCE = re.compile(r"^```(jsonl?)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def doc_examples() -> list[str]:
    lines: list[str] = []
    for lang, body in _FENCE.findall(DOC_PATH.read_text(encoding="utf-8")):
        rows = [row for row in body.splitlines() if row.strip()]
        if lang == "json" and len(rows) != 1:
            continue  # a multi-line json block is not a protocol line
        lines.extend(row for row in rows if row.lstrip().startswith("{"))
    return lines


DOC_EXAMPLES = doc_examples()


def test_docs_have_examples_for_every_type() -> None:
    assert len(DOC_EXAMPLES) >= len(protocol.FIELDS) + 10
    assert {json.loads(line)["type"] for line in DOC_EXAMPLES} == set(protocol.FIELDS)


@pytest.mark.parametrize("line", DOC_EXAMPLES, ids=[f"doc{i}" for i in range(len(DOC_EXAMPLES))])
def test_doc_example_is_valid(line: str) -> None:
    event = protocol.parse_line(line.encode("utf-8"))
    assert not isinstance(event, ev.InvalidLine), event
    VALIDATOR.validate(json.loads(line))


# --- (d) generated valid objects round-trip ----------------------------------------

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
_int = st.integers(min_value=I64_MIN, max_value=U64_MAX)
_num = _int | st.floats(allow_nan=False, allow_infinity=False)
_json = st.recursive(
    st.none() | st.booleans() | _num | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_KIND_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "str": _text,
    "text": _text,
    "bool": st.booleans(),
    "int": _int,
    "num": _num,
    "obj": st.dictionaries(_text, _json, max_size=4),
    "strlist": st.lists(_text, max_size=4),
    "any": _json,
}
_COMMON_KINDS = dict(protocol._COMMON)


def _field_strategy(kind: str, name: str, field_kind: str) -> st.SearchStrategy[Any]:
    allowed = protocol._ENUMS.get((kind, name))
    if allowed is not None:
        return st.sampled_from(allowed)
    if (kind, name) == ("tool_call", "tool"):
        return _text.filter(bool)
    if (kind, name) == ("hello", "protocol"):
        return st.just(protocol.PROTOCOL_VERSION)
    if kind == "usage" and field_kind in ("int", "num"):  # a usage's counts are never negative
        return _KIND_STRATEGIES[field_kind].filter(lambda v: v >= 0)
    return _KIND_STRATEGIES[field_kind]


@st.composite
def valid_objects(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    obj: dict[str, Any] = {"type": kind}
    specs = [(n, k, False) for n, k in _COMMON_KINDS.items()] + list(protocol.FIELDS[kind])
    for name, field_kind, required in specs:
        required = required or any(n == name and r for n, _, r in protocol.FIELDS[kind])
        strategy = _field_strategy(kind, name, field_kind)
        if required:
            obj[name] = draw(strategy)
        else:
            choice = draw(st.sampled_from(("absent", "null", "value", "value")))
            if choice == "null":
                obj[name] = None
            elif choice == "value":
                obj[name] = draw(strategy)
    known = {"type", *_COMMON_KINDS, *(n for n, _, _ in protocol.FIELDS[kind])}
    extras = draw(st.dictionaries(_text.filter(lambda k: k not in known), _json, max_size=3))
    return {**extras, **obj}


@pytest.mark.parametrize("kind", list(protocol.FIELDS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_objects_parse_and_round_trip(kind: str, data: st.DataObject) -> None:
    obj = data.draw(valid_objects(kind))
    line = orjson.dumps(obj)
    assert VALIDATOR.is_valid(obj), list(VALIDATOR.iter_errors(obj))
    event = protocol.parse_line(line, seq=5)
    assert not isinstance(event, ev.InvalidLine), event
    assert type(event) is ev.EVENT_TYPES[kind]
    for name in {*_COMMON_KINDS, *(n for n, _, _ in protocol.FIELDS[kind])}:
        value = obj.get(name)
        if value is None:
            continue
        if name == "ts":
            assert event.ts == float(value)
        else:
            assert getattr(event, name) == value, name
    again = protocol.parse_line(protocol.dumps(event), seq=5)
    assert again == event
    assert again.to_dict() == event.to_dict()
    assert VALIDATOR.is_valid(event.to_dict())


@pytest.mark.parametrize("kind", list(protocol.FIELDS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_typed_path_builds_the_careful_paths_event_field_for_field(kind: str, data: st.DataObject) -> None:
    """typed.EVENT_OF stores each field itself (no __init__): every slot is set, to what the careful path gives."""
    obj = {k: v for k, v in data.draw(valid_objects(kind)).items()
           if k in {"type", *_COMMON_KINDS, *(n for n, _, _ in protocol.FIELDS[kind])}}  # no unknown fields
    line = orjson.dumps(obj)
    try:
        record = typed.decode_record(line)
    except typed.REFUSED:
        return  # a null where a default is, a number past 64 bits...: the careful path's own (tested above)
    event = typed.EVENT_OF[type(record)](record, 5)
    if event is None:
        return  # refused by its builder: another protocol version, arguments nested too deep
    careful = protocol.event_from_object(orjson.loads(line), 5)
    assert type(event) is type(careful)
    for f in dataclasses.fields(careful):
        assert getattr(event, f.name) == getattr(careful, f.name), f.name
    if kind == "attempt" and record.work is None:  # type: ignore[union-attr]  # a fresh list each time
        again = typed.EVENT_OF[type(record)](record, 5)
        assert again.work == [] and again.work is not event.work  # type: ignore[attr-defined]


def test_a_byte_order_mark_is_tolerated() -> None:
    event = protocol.parse_line(b'\xef\xbb\xbf{"type":"done"}', 1)
    assert event.kind == "done"


def test_hello_with_another_protocol_version_is_rejected() -> None:
    event = protocol.parse_line(b'{"type":"hello","protocol":2}', 1)
    assert event.kind == "invalid_line"
    assert "protocol 2 is not supported" in event.reason


# --- nesting depth (supervisor/bounds.py) ------------------------------------------

DEPTHS = [2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 250, 255, 1023, 1024, 1025, 5000]


def nested(depth: int) -> str:
    """An object nested `depth` levels deep, as text."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_tool_call_line_nests_at_most_max_depth(depth: int) -> None:
    line = '{"type":"tool_call","tool":"t","call_id":"c1","args":' + nested(depth - 1) + "}"
    event = protocol.parse_line(line.encode(), 9)
    if depth <= MAX_DEPTH:
        assert isinstance(event, ev.ToolCall) and event.args == json.loads(line)["args"]
    else:
        assert isinstance(event, ev.InvalidLine) and event.reason == TOO_DEEP
        assert event.seq == 9 and len(event.preview) <= protocol.PREVIEW_CHARS + 1


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1, 1024])
def test_validation_error_raw_is_bounded_like_args(depth: int) -> None:
    line = '{"type":"validation_error","message":"m","raw":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    event = protocol.parse_line(line, 2)
    assert isinstance(event, ev.ValidationError) is (depth <= MAX_DEPTH)


def test_unknown_fields_are_dropped_unread_up_to_what_json_can_read() -> None:
    line = '{"type":"done","extra":' + nested(1000) + "}"
    assert protocol.parse_line(line) == ev.Done(seq=0)
    line = '{"type":"done","extra":' + nested(1024) + "}"
    assert protocol.parse_line(line).reason == TOO_DEEP  # type: ignore[attr-defined]


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1, 1024, 1025])
def test_load_object_bounds_the_whole_line_for_the_recorded_formats(depth: int) -> None:
    line = ('{"type":"x","extra":' + nested(depth - 1) + "}").encode()
    if depth <= MAX_DEPTH:
        assert protocol.load_object(line)["type"] == "x"
    else:
        with pytest.raises(protocol.LineRejected, match=re.escape(TOO_DEEP)):
            protocol.load_object(line)
