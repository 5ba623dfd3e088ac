"""The one depth bound (supervisor/bounds.py): its checks and cuts, at the bound and far past it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden.supervisor.bounds import (CUT_MARKER, MAX_DEPTH, MAX_RECORD_DEPTH, cut_deep, cut_deep_json,
                                          depth_exceeds, may_exceed_depth)
from tests.support.nesting import depth_of, nest

# the bound, one past it, past orjson's writer (254), at and past its reader (1024), and far beyond
DEPTHS = [1, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 250, 255, 1023, 1024, 1025, 5000]


@pytest.mark.parametrize("depth", DEPTHS)
def test_depth_exceeds_and_cut_deep_at_every_depth(depth: int) -> None:
    value = nest(depth)
    assert depth_exceeds(value) is (depth > MAX_DEPTH)
    cut = cut_deep(value)
    assert depth_of(cut) == min(depth, MAX_DEPTH)
    assert (CUT_MARKER in json.dumps(cut)) is (depth > MAX_DEPTH)


def without_digests(text: bytes) -> Any:
    """Decoded JSON with the digests cut_deep_json adds to its markers taken out."""
    return json.loads(re.sub(rb"; digest [0-9a-f]{16}\]", b"]", text))


@pytest.mark.parametrize("depth", DEPTHS)
def test_cut_deep_json_takes_text_no_parser_could(depth: int) -> None:
    text = b'{"keep":"[not a bracket{","deep":' + b"[" * depth + b"]" * depth + b',"after":1}'
    cut = without_digests(cut_deep_json(text))
    assert cut == cut_deep({"keep": "[not a bracket{", "deep": nest(depth), "after": 1})
    assert depth_of(cut) == min(depth + 1, MAX_DEPTH)


def test_the_text_cut_tells_different_deep_parts_apart() -> None:
    def deep(leaf: bytes) -> bytes:
        return b'{"v":' + b"[" * 100 + leaf + b"]" * 100 + b"}"

    one, two = cut_deep_json(deep(b"1")), cut_deep_json(deep(b"2"))
    assert one != two and without_digests(one) == without_digests(two)
    assert cut_deep_json(deep(b"1")) == one


def test_cut_deep_json_leaves_bad_text_bad() -> None:
    unclosed = b'{"a":' + b"[" * 5000
    with pytest.raises(ValueError):
        json.loads(cut_deep_json(unclosed))  # not a RecursionError: the deep part is dropped
    assert cut_deep_json(b"{not json") == b"{not json"


def test_the_cheap_count_never_misses_a_deep_line() -> None:
    assert not may_exceed_depth(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    assert may_exceed_depth(b"[" * (MAX_DEPTH + 1))
    assert may_exceed_depth("{" * (MAX_DEPTH + 1))
    assert not may_exceed_depth('"' + "[" * 500 + '"', 1000)


def test_a_record_at_the_record_bound_can_be_written_inside_a_reply_and_one_level_more_cannot() -> None:
    import orjson

    reply = {"id": 1, "ok": True, "result": {"events": [{"id": 1, "data": "RECORD"}]}}
    assert MAX_DEPTH < MAX_RECORD_DEPTH
    orjson.dumps(json.loads(json.dumps(reply).replace('"RECORD"', json.dumps(nest(MAX_RECORD_DEPTH)))))
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(json.loads(json.dumps(reply).replace('"RECORD"', json.dumps(nest(MAX_RECORD_DEPTH + 1)))))


json_values = st.recursive(st.none() | st.integers() | st.text(max_size=3),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                        max_size=3),
                           max_leaves=40)


@given(json_values, st.integers(min_value=1, max_value=6))
def test_cuts_agree_on_any_value(value: Any, limit: int) -> None:
    text = json.dumps({"v": value}).encode()
    assert without_digests(cut_deep_json(text, limit)) == cut_deep({"v": value}, limit)
    assert depth_exceeds({"v": value}, limit) is (depth_of({"v": value}) > limit)
