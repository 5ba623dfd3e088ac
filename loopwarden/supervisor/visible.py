"""Untrusted text made safe to show a person: every character a terminal could act on becomes a visible escape.

Agents are untrusted, and so is everything derived from them (tool names and arguments, outputs,
messages, stderr lines, gate reasons, session names, process command lines, spill files). A terminal
interprets ESC sequences (window titles, OSC 52 clipboard writes, hyperlinks, clearing the screen),
BEL, backspace and carriage return (overwriting what was shown), 8-bit C1 controls such as U+009B (a
one-byte CSI) and Unicode bidi overrides (text shown in another order than it reads). All of them are
replaced with the escape Python would write (`\\x1b`, `\\x07`, `\\r`, `\\x9b`, `\\u202e`), so the operator
sees them and no terminal acts on them.

* `visible` is for one-line places (table cells, one-line CLI records, toasts, status lines, log
  lines): newline and tab are escaped too (`\\n`, `\\t`), so one record is one line.
* `visible_lines` is for multi-line places (the spill viewer; the detail stream's records, whose
  lines pick a text's first line): `\\n` stays a line break, `\\r\\n` becomes `\\n` and tab stays
  a tab; everything else is escaped as above.
* `visible_tree` applies `visible` (or `visible_lines`) to every string in what JSON decodes to.

A backslash is left alone, so clean text (Windows paths, regexes) is never changed; the flip side is
that an agent can print a literal `\\x1b` that reads like an escaped ESC. Where exact text matters,
the JSON outputs (`--json`, the store) hold it unchanged. This module imports nothing but the
standard library and orjson (no Textual, click or I/O), so the engine, the daemon, the CLI and the
console can all use it.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}

# (first, last) code points: C0 controls, DEL and C1 controls; the Arabic letter mark; the left-to-right
# and right-to-left marks; the line and paragraph separators (str.splitlines and some terminals break
# lines there), the bidi embeddings and overrides (U+202A-U+202E); the bidi isolates (U+2066-U+2069);
# lone surrogates (they cannot even be encoded for a UTF-8 terminal).
ESCAPED: tuple[tuple[int, int], ...] = (
    (0x00, 0x1F), (0x7F, 0x9F), (0x061C, 0x061C), (0x200E, 0x200F), (0x2028, 0x202E), (0x2066, 0x2069),
    (0xD800, 0xDFFF),
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    return re.compile("[" + "".join(f"\\u{first:04x}-\\u{last:04x}" for first, last in ranges) + "]")


_ONE_LINE = _char_class(ESCAPED)
_MULTI_LINE = _char_class(((0x00, 0x08), (0x0B, 0x1F), *ESCAPED[1:]))  # tab (0x09) and newline (0x0A) stay


def _escape(code: int) -> str:
    char = chr(code)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


class _Escapes(dict[str, str]):
    """Each character's escape, computed the first time it is met and then looked up."""

    def __missing__(self, char: str) -> str:
        self[char] = escape = _escape(ord(char))
        return escape


# A regex finds the characters and each is looked up here: str.translate with a table of the same
# escapes was 4 to 6 times slower on long text, where most characters are clean (it looks each one up).
_ESCAPE = _Escapes()


def _replace(match: re.Match[str]) -> str:
    return _ESCAPE[match[0]]


def visible(text: str) -> str:
    """`text` for a one-line place: every control character, newline and tab included, as a visible escape."""
    if text.isprintable():  # the common case, checked in C: every escaped character is non-printable
        return text
    return _ONE_LINE.sub(_replace, text)


def visible_lines(text: str) -> str:
    """`text` for a multi-line place: newlines and tabs kept (CRLF as LF), every other control escaped."""
    if text.isprintable():
        return text
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return _MULTI_LINE.sub(_replace, text)


def visible_tree(value: Any, *, multiline: bool = False) -> Any:
    """`value` with `visible` (`visible_lines` if `multiline`) applied to every string in it, keys too.

    Made for what JSON decodes to. `value` is never changed: when no string in it needs an escape (the
    common case, found by one scan of its JSON) it is returned as it is, else as a copy (dicts and
    lists copied, a tuple as a list, other values kept). The copy walks with a stack of its own, so no
    nesting depth can overflow Python's.
    """
    show = visible_lines if multiline else visible
    if isinstance(value, str):
        return show(value)
    if not isinstance(value, _CONTAINERS) or _clean(value, multiline):
        return value
    root = _empty_copy(value)
    pending: list[tuple[Any, Any]] = [(value, root)]
    while pending:
        source, copy = pending.pop()
        for key, item in source.items() if isinstance(source, dict) else enumerate(source):
            if isinstance(key, str) and not key.isprintable():
                key = show(key)
            if isinstance(item, str):
                if not item.isprintable():  # the fast path inlined: a record is mostly short clean strings
                    item = show(item)
            elif isinstance(item, _CONTAINERS):
                child = _empty_copy(item)
                pending.append((item, child))
                item = child
            copy[key] = item
    return root


_CONTAINERS = (dict, list, tuple)

# In orjson's output a C0 control is a backslash escape (\n, \u001b, ...) and every other character
# is raw UTF-8, so a string needs an escape exactly when its JSON holds one of these (a literal
# backslash before n, as in "\\n", only sends a clean value the slow way). Lone surrogates make
# orjson raise, which also sends the value the slow way.
_OTHERS = rb"|\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]"
_NEEDS_ESCAPE = re.compile(rb"\\[bfnrtu]" + _OTHERS)
_NEEDS_ESCAPE_MULTILINE = re.compile(rb"\\[bfru]" + _OTHERS)  # \n and \t stay


def _clean(value: Any, multiline: bool) -> bool:
    """No string in `value` needs an escape: one scan of its JSON, in C, instead of a walk in Python."""
    try:
        encoded = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: lone surrogates, keys that are not strings, deep nesting
        return False
    if encoded.isascii() and b"\\" not in encoded and b"\x7f" not in encoded:
        return True  # the common case, in three byte scans far faster than the regex
    return (_NEEDS_ESCAPE_MULTILINE if multiline else _NEEDS_ESCAPE).search(encoded) is None


def _empty_copy(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> dict[Any, Any] | list[Any]:
    """An empty dict for a dict, a list of as many Nones for a list or tuple, filled in by `visible_tree`."""
    return {} if isinstance(value, dict) else [None] * len(value)
