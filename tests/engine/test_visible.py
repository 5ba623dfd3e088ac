"""The sanitiser for human output: controls become visible escapes, clean text is untouched."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden.supervisor.visible import ESCAPED, visible, visible_lines, visible_tree

BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
SEPARATORS = {0x2028, 0x2029}


def dangerous(char: str, *, allowed: str = "") -> bool:
    """A character a terminal could act on, or that reorders or breaks a line, unless `allowed`."""
    if char in allowed:
        return False
    return unicodedata.category(char) in ("Cc", "Cs") or ord(char) in BIDI | SEPARATORS


CLEAN = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs"),
                              exclude_characters="".join(map(chr, BIDI | SEPARATORS))))


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # window title
    ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # clipboard write
    ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "\\x1b]8;;http://x\\x1b\\link\\x1b]8;;\\x1b\\"),  # hyperlink
    ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear screen
    ("\x9b31m", "\\x9b31m"),  # the 8-bit CSI
    ("ok\rFAIL", "ok\\rFAIL"), ("a\bb", "a\\x08b"), ("\x00\x7f\x85", "\\x00\\x7f\\x85"),
    ("a\nb\tc", "a\\nb\\tc"),
    ("abc\u202edcba", "abc\\u202edcba"), ("\u2066x\u2069", "\\u2066x\\u2069"), ("\u200f", "\\u200f"),
    ("line\u2028next", "line\\u2028next"), ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
])
def test_each_control_becomes_the_escape_python_would_write(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert visible_tree({"k": [raw]}) == {"k": [shown]}


def test_every_code_point_is_either_kept_or_escaped() -> None:
    """All 1,114,112 code points at once: only the escaped ranges change, and nothing dangerous is left."""
    every = "".join(map(chr, range(0x110000)))
    escaped = {code for first, last in ESCAPED for code in range(first, last + 1)}
    shown = visible(every)
    assert not any(dangerous(char) for char in shown)
    kept = "".join(char for char in every if ord(char) not in escaped)
    assert visible(kept) == kept
    assert len(shown) == len(kept) + sum(len(repr(chr(code))) - 2 for code in escaped)


def test_multi_line_keeps_newlines_and_tabs_and_escapes_the_rest() -> None:
    assert visible_lines("one\r\ntwo\tcols\rover\x1b[2J") == "one\ntwo\tcols\\rover\\x1b[2J"
    assert visible_lines("\u202e\x07\x0b\x0c") == "\\u202e\\x07\\x0b\\x0c"


@given(st.text())
def test_one_line_output_has_no_control_character_at_all_and_showing_twice_changes_nothing(text: str) -> None:
    shown = visible(text)
    assert not any(dangerous(char) for char in shown)
    shown.encode("utf-8")  # a lone surrogate would raise here, as it would on a terminal
    assert visible(shown) == shown


@given(st.text())
def test_multi_line_output_has_no_control_character_but_newline_and_tab(text: str) -> None:
    shown = visible_lines(text)
    assert not any(dangerous(char, allowed="\n\t") for char in shown)
    assert visible_lines(shown) == shown


@given(CLEAN)
def test_clean_text_is_unchanged_around_an_escape(text: str) -> None:
    assert visible(text) == text
    assert visible(f"{text}\x1b{text}") == f"{text}\\x1b{text}"
    assert visible_tree([{text: text + "\x07"}]) == [{text: text + "\\x07"}]


@given(CLEAN.map(lambda t: t.replace("\r\n", "")))
def test_clean_text_with_line_breaks_is_unchanged_in_multi_line_places(text: str) -> None:
    text = "\n".join([text, "\t" + text, ""])
    assert visible_lines(text + "\x9b") == text + "\\x9b"


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids), max_leaves=30))
def test_a_tree_keeps_its_shape_and_every_string_is_made_visible(tree: object) -> None:
    shown = visible_tree(tree)
    pending = [(tree, shown)]
    while pending:
        raw, seen = pending.pop()
        if isinstance(raw, dict):
            expected = {visible(k): v for k, v in raw.items()}  # two keys may show alike ("\x1b", "\\x1b")
            assert isinstance(seen, dict) and list(seen) == list(expected)
            pending += [(v, seen[k]) for k, v in expected.items()]
        elif isinstance(raw, list):
            assert isinstance(seen, list) and len(seen) == len(raw)
            pending += list(zip(raw, seen, strict=True))
        elif isinstance(raw, str):
            assert seen == visible(raw) and not any(dangerous(char) for char in seen)
        else:
            assert seen is raw


@pytest.mark.parametrize("multiline", [False, True])
def test_a_tree_holding_any_escaped_character_is_shown_escaped(multiline: bool) -> None:
    """The clean-tree check (a scan of the tree's JSON) misses no character, in a value or a key."""
    for code in (code for first, last in ESCAPED for code in range(first, last + 1)):
        char = chr(code)
        shown = char if multiline and char in "\n\t" else repr(char)[1:-1]  # the escape Python would write
        assert visible_tree([f"a{char}"], multiline=multiline) == [f"a{shown}"]
        assert visible_tree({"k": {f"{char}b": [1, "c"]}}, multiline=multiline) == {"k": {f"{shown}b": [1, "c"]}}


def test_a_clean_tree_is_returned_as_it_is() -> None:
    ascii_only = {"tool": "bash", "args": {"cmd": "pytest -q", "n": 2}, "ok": [True, None, 1.5]}
    assert visible_tree(ascii_only) is ascii_only
    wider = {"output": "ok ✓ 中 — é", "rtl": "שלום"}
    assert visible_tree(wider) is wider
    backslashes = {"path": "C:\\new\\table", "regex": "\\u00e9|\\t"}  # clean, though their JSON looks escaped
    assert visible_tree(backslashes) == backslashes
    multi = {"text": "line one\n\tline two"}
    assert visible_tree(multi, multiline=True) is multi and visible_tree(multi) == {"text": "line one\\n\\tline two"}


def test_a_tree_is_copied_never_changed_and_any_depth_is_fine() -> None:
    record = {"tool": "x\x1b", "args": {"k\x07": ["\x9b", 1, None, 2.5, True]}, "seq": 3, "t": ("\r",)}
    assert visible_tree(record) == {"tool": "x\\x1b", "args": {"k\\x07": ["\\x9b", 1, None, 2.5, True]}, "seq": 3,
                                    "t": ["\\r"]}
    assert record["tool"] == "x\x1b" and record["args"] == {"k\x07": ["\x9b", 1, None, 2.5, True]}
    assert visible_tree({"k\n": ["a\r\nb\tc\x1b"]}, multiline=True) == {"k\n": ["a\nb\tc\\x1b"]}
    deep: list[object] = ["\x1b"]
    for _ in range(100_000):  # far deeper than Python's recursion limit
        deep = [deep]
    shown = visible_tree(deep)
    for _ in range(100_000):
        shown = shown[0]
    assert shown == ["\\x1b"]
