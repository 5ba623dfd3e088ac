"""Canonical call signatures (spec: "identical = same tool and canonically equal arguments
(key order, number formatting and whitespace never matter; call ids never count)").
"""

from __future__ import annotations

import json
import string

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loopwarden.supervisor.events import ToolResult
from loopwarden.supervisor.signature import call_signature, output_digest, output_key, same_output
from tests.engine.helpers import call, ok, run, summary

SAFE_INT = 2**53 - 1  # every int in this range has an exact float twin
KEY = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=8)
# Strings without whitespace: whether *surrounding whitespace inside a value* matters is not
# what these properties are about (JSON formatting whitespace is).
WORD = st.text(alphabet=string.ascii_letters + string.digits + "._/:-", max_size=12)
LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-SAFE_INT, SAFE_INT),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12), WORD,
)
JSON = st.recursive(LEAF, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                 st.dictionaries(KEY, kids, max_size=4)), max_leaves=12)
ARGS = st.dictionaries(KEY, JSON, max_size=6)
TOOL = st.text(alphabet=string.ascii_letters + "_", min_size=1, max_size=10)
# local settings (a global profile would leak into other modules); no example database on disk
FAST = settings(max_examples=50, deadline=None, database=None)


def reorder(value, rnd):
    """The same value with every object's keys inserted in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {k: reorder(value[k], rnd) for k in keys}
    if isinstance(value, list):
        return [reorder(v, rnd) for v in value]
    return value


def renumber(value, rnd):
    """The same value with some ints written as floats and some integral floats as ints."""
    if isinstance(value, dict):
        return {k: renumber(v, rnd) for k, v in value.items()}
    if isinstance(value, list):
        return [renumber(v, rnd) for v in value]
    if type(value) is int and rnd.random() < 0.5:
        return float(value)
    if type(value) is float and value.is_integer() and rnd.random() < 0.5:
        return int(value)
    return value


def leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, path + (i,))
    else:
        yield path, value


def replaced(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        out = dict(value)
    else:
        out = list(value)
    out[head] = replaced(value[head], rest, new)
    return out


def different(leaf):
    """A value that is certainly a different JSON value from `leaf`."""
    if leaf is None:
        return 0
    if type(leaf) is bool:
        return not leaf
    if type(leaf) in (int, float):
        return leaf + 1  # |leaf| <= 2**53, so +1 is exact enough to differ
    return leaf + "x"


@FAST
@given(ARGS, TOOL, st.randoms(use_true_random=False))
def test_key_order_never_matters(args, tool, rnd):
    assert call_signature(tool, reorder(args, rnd)) == call_signature(tool, args)


@FAST
@given(ARGS, TOOL, st.one_of(st.none(), st.integers(0, 8), st.just("\t")),
       st.sampled_from([(",", ":"), (", ", ": "), (",", ": "), (" ,  ", " :\n ")]), st.booleans(), st.booleans())
def test_json_formatting_whitespace_never_matters(args, tool, indent, separators, sort_keys, ascii_only):
    text = json.dumps(args, indent=indent, separators=separators, sort_keys=sort_keys, ensure_ascii=ascii_only)
    assert call_signature(tool, json.loads(text)) == call_signature(tool, args)


@FAST
@given(ARGS, TOOL, st.randoms(use_true_random=False))
def test_one_and_one_point_zero_never_matter(args, tool, rnd):
    assert call_signature(tool, renumber(args, rnd)) == call_signature(tool, args)


@FAST
@given(ARGS.filter(lambda a: any(True for _ in leaves(a))), TOOL, st.data())
def test_a_different_value_always_matters(args, tool, data):
    spots = list(leaves(args))
    path, leaf = data.draw(st.sampled_from(spots))
    changed = replaced(args, path, different(leaf))
    assert call_signature(tool, changed) != call_signature(tool, args)


@FAST
@given(ARGS, TOOL, TOOL)
def test_a_different_tool_always_matters(args, tool, other):
    assume(tool != other)
    assert call_signature(tool, args) != call_signature(other, args)


@FAST
@given(ARGS)
def test_a_missing_or_extra_key_matters(args):
    extra = dict(args)
    extra["extra key!"] = 1  # '!' and ' ' are not in KEY's alphabet
    assert call_signature("t", extra) != call_signature("t", args)


def test_number_spellings_from_json_text_are_equal():
    a = json.loads('{"n": 1, "m": [2, 3], "o": {"p": 100}}')
    b = json.loads('{"o": {"p": 1e2}, "m": [2.0, 3.00], "n": 1.0}')
    assert call_signature("t", a) == call_signature("t", b)


def test_large_integral_number_spellings_are_equal():
    a = json.loads('{"offset": 10000000000000000}')
    b = json.loads('{"offset": 1e16}')
    assert call_signature("t", a) == call_signature("t", b)


def test_bool_is_not_a_number():
    assert call_signature("t", {"x": True}) != call_signature("t", {"x": 1})
    assert call_signature("t", {"x": None}) != call_signature("t", {"x": 0})


@FAST
@given(st.text(min_size=1, max_size=6), st.text(min_size=1, max_size=6))
def test_call_ids_are_not_part_of_identity(id_a, id_b):
    # behaviourally: two calls differing only in call_id are a repetition (nudge at the 2nd)
    events = [call("grep", {"pattern": "TODO"}, call_id=id_a), ok("grep", "a.py:1: TODO", call_id=id_a),
              call("grep", {"pattern": "TODO"}, call_id=id_b), ok("grep", "a.py:1: TODO", call_id=id_b)]
    assert summary(run(events)) == [("nudge", "repetition", 4)]


def test_the_engine_judges_every_call_a_parser_accepts_and_refuses_deeper_arguments() -> None:
    from loopwarden.supervisor import protocol
    from loopwarden.supervisor.bounds import MAX_DEPTH, TOO_DEEP
    from loopwarden.supervisor.health import SessionHealth
    from loopwarden.supervisor.signature import MAX_ARGS_DEPTH
    from tests.engine.helpers import config

    def args(levels: int) -> str:
        return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)

    health = SessionHealth(config())
    at_bound = protocol.parse_line('{"type":"tool_call","tool":"t","args":' + args(MAX_DEPTH - 1) + "}", 1)
    health.observe(at_bound, 1.0)
    assert health.by_type == {"tool_call": 1} and not health.validation_failures
    deeper = call("t", json.loads(args(MAX_ARGS_DEPTH + 1)), seq=2)  # an event no parser would have built
    health.observe(deeper, 2.0)
    assert list(health.validation_failures) == [(2, f"tool_call: {TOO_DEEP}")]


# ---- results compared by key (`output_key`, `same_output`): exactly when their digests are equal ----
OUTPUT = st.one_of(st.sampled_from(["", "ok", "ok ", "E", "x" * 70_000, "y" * 70_000]),
                   st.text(max_size=20))
RESULT = st.tuples(OUTPUT, st.booleans(), st.sampled_from([None, 0, 1, 2]), st.booleans())


def _result(output: str, is_error: bool, exit_code: int | None, digested: bool) -> ToolResult:
    result = ToolResult(output=output, is_error=is_error, exit_code=exit_code)
    if digested:  # as a streamed output comes: its digest made before any rule sees it
        result.digest = output_digest(output, result.failed)
    return result


@FAST
@given(RESULT, RESULT)
def test_output_keys_are_equal_exactly_when_the_digests_are(a: tuple, b: tuple) -> None:
    first, second = _result(*a), _result(*b)
    expected = (output_digest(first.output, first.failed) == output_digest(second.output, second.failed))
    assert same_output(output_key(first), output_key(second)) is expected
    assert same_output(output_key(second), output_key(first)) is expected


def test_an_output_key_holds_the_output_not_the_result_a_spill_changes() -> None:
    result = ToolResult(output="the whole output", exit_code=0)
    key = output_key(result)
    result.output = "spilled to a file"  # what the shell does to an event after it is judged
    assert same_output(key, output_key(ToolResult(output="the whole output")))
    assert not same_output(key, output_key(result))


# ---- a failure's key and location on hostile output: linear, whatever the text -----------------------------
# Each of these took 18 to 90 seconds of CPU with a pattern that backtracked; the bound leaves a wide margin.
HOSTILE = ["a" * 65_000, "a." * 32_000, "1" * 65_000, "C:\\" * 21_000, "x/" * 32_000 + ":"]


def test_failure_location_and_key_are_fast_on_hostile_output() -> None:
    import time

    from loopwarden.supervisor.signature import failure_key, failure_location
    for text in HOSTILE:
        start = time.process_time()
        failure_location(text)
        failure_key("Bash", text)
        assert time.process_time() - start < 3.0, text[:20]


def test_failure_location_names_a_file_and_line_not_a_host_and_port() -> None:
    from loopwarden.supervisor.signature import failure_location
    assert failure_location("GET localhost:8080 failed\nsrc/app.py:12: TypeError") == "src/app.py:12"
    assert failure_location('Traceback\n  File "/r/x.py", line 4, in f\n') == "/r/x.py:4"
    assert failure_location("no location here: 12") is None
    assert failure_key_hides_windows_temp()


def failure_key_hides_windows_temp() -> bool:
    from loopwarden.supervisor.signature import failure_key
    return (failure_key("Bash", r"cannot open C:\Users\ann\AppData\Local\Temp\tmp1a2b\x.txt")
            == failure_key("Bash", r"cannot open C:\Users\ann\AppData\Local\Temp\tmp9z8y\x.txt"))
