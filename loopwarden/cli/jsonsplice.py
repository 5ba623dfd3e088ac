"""Edit a JSON text in place: remove and append entries of its objects and arrays, every other byte kept.

A document is never rewritten from its parsed values: that would change numbers (`1.0e400` becomes
`Infinity`, `1E5` becomes `100000.0`), escapes, spacing and line ends. `parse` finds where each value
and member is in the text; `delete` and `append` give splices that add or cut exactly one stretch
of text per container, in the container's own style (the indentation of its entries, the file's line
end, its spacing around `:` and `,`), so that appending entries and deleting them again gives back
the same bytes. The text must already be valid JSON (`json.loads` checks it first).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .dotfiles import newline_of

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"[A-Za-z0-9+\-.]+")  # numbers, true, false, null, and Python's NaN and Infinity
_INDENT = re.compile(r"[ \t]*")

Splice = tuple[int, int, str]  # replace text[start:end] with the string


@dataclass
class Node:
    """A value's place in the text; an object or array also has its entries."""

    start: int
    end: int
    kind: str = ""  # "{", "[", or "" for a scalar
    items: list[Item] = field(default_factory=list)

    def last(self, key: str) -> Item | None:
        """An object's member `key` (the last one, as JSON readers take it)."""
        return next((item for item in reversed(self.items) if item.key == key), None)


@dataclass
class Item:
    """An entry of a container: from its key (or value) to the end of its value."""

    start: int
    end: int
    key: str | None
    value: Node


@dataclass(frozen=True)
class Style:
    """How a document writes what is added to it."""

    newline: str = "\n"
    indent: str | None = "  "  # None: a document written on one line
    colon: str = ": "
    comma: str = " "  # after a comma between entries on one line


def parse(text: str) -> Node:
    """Where every value of the JSON text is; ValueError if it is not JSON."""
    node, pos = _value(text, _skip(text, 0))
    if _skip(text, pos) != len(text):
        raise ValueError(f"extra data at character {pos}")
    return node


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _value(text: str, pos: int) -> tuple[Node, int]:
    char = text[pos:pos + 1]
    if char in ("{", "["):
        return _container(text, pos)
    match = (_STRING if char == '"' else _SCALAR).match(text, pos)
    if not match:
        raise ValueError(f"unexpected {char!r} at character {pos}")
    return Node(pos, match.end()), match.end()


def _container(text: str, pos: int) -> tuple[Node, int]:
    node = Node(pos, pos, text[pos])
    close = "}" if node.kind == "{" else "]"
    p = _skip(text, pos + 1)
    while text[p:p + 1] != close:
        if node.items:
            if text[p:p + 1] != ",":
                raise ValueError(f"expected ',' or {close!r} at character {p}")
            p = _skip(text, p + 1)
        start, key = p, None
        if node.kind == "{":
            match = _STRING.match(text, p)
            p = _skip(text, match.end()) if match else p
            if not match or text[p:p + 1] != ":":
                raise ValueError(f"expected a member at character {start}")
            key = json.loads(match.group())
            p = _skip(text, p + 1)
        value, p = _value(text, p)
        node.items.append(Item(start, p, key, value))
        p = _skip(text, p)
    node.end = p + 1
    return node, node.end


def _nodes(node: Node) -> Iterator[Node]:
    yield node
    for item in node.items:
        yield from _nodes(item.value)


def style_of(text: str, root: Node) -> Style:
    """The document's own way: its line end, the indentation step of its first container with entries
    (None if that one is written on one line), its `:` and its spacing after `,` on one line."""
    containers = [n for n in _nodes(root) if n.items]
    indent: str | None = "  "
    if containers:
        first = containers[0]
        before = text[first.start + 1:first.items[0].start]
        outer, inner = _line_indent(text, first.start), before.rpartition("\n")[2]
        if "\n" not in before:
            indent = None
        elif inner.startswith(outer) and inner != outer:
            indent = inner[len(outer):]
    colon, comma = ": ", " "
    member = next((item for n in containers if n.kind == "{" for item in n.items), None)
    key = _STRING.match(text, member.start) if member else None
    if member and key and "\n" not in text[key.end():member.value.start]:
        colon = text[key.end():member.value.start]
    pair = next((n for n in containers if len(n.items) > 1), None)
    if pair:
        after = text[text.index(",", pair.items[0].end) + 1:pair.items[1].start]
        comma = after if "\n" not in after else comma
    return Style(newline_of(text), indent, colon, comma)


def _line_indent(text: str, pos: int) -> str:
    """The spaces and tabs that begin the line `pos` is on."""
    match = _INDENT.match(text, text.rfind("\n", 0, pos) + 1)
    return match.group() if match else ""


def _render(entry: tuple[str | None, Any], style: Style, at: str | None) -> str:
    """One entry as JSON text: over lines indented from `at`, or on one line when `at` is None."""
    key, value = entry
    if at is None:
        text = json.dumps(value, ensure_ascii=False, separators=("," + style.comma, style.colon))
    else:
        text = json.dumps(value, ensure_ascii=False, indent=style.indent or "  ", separators=(",", style.colon))
        text = text.replace("\n", style.newline + at)
    return text if key is None else json.dumps(key, ensure_ascii=False) + style.colon + text


def append(text: str, node: Node, entries: list[tuple[str | None, Any]], style: Style) -> Splice:
    """Add `entries` (key and value; key None in an array) after the container's last entry."""
    if node.items:
        last = node.items[-1]
        after = text.index(",", node.items[-2].end) + 1 if len(node.items) > 1 else node.start + 1
        before = text[after:last.start]
        if "\n" in before:
            at: str | None = before.rpartition("\n")[2]
        else:
            at, before = None, before if len(node.items) > 1 else style.comma
        return last.end, last.end, "".join("," + before + _render(e, style, at) for e in entries)
    inside = text[node.start + 1:node.end - 1]
    outer = _line_indent(text, node.start)
    if style.indent is None or (inside and "\n" not in inside):
        return node.start + 1, node.start + 1, ("," + style.comma).join(_render(e, style, None) for e in entries)
    at = outer + style.indent
    body = "".join(("," if i else "") + style.newline + at + _render(e, style, at) for i, e in enumerate(entries))
    return node.start + 1, node.start + 1, body + ("" if inside else style.newline + outer)


def delete(text: str, node: Node, indices: Iterable[int]) -> list[Splice]:
    """Remove the container's entries at `indices`, with the comma and spacing that joined each to the
    others. A container left empty keeps what was inside it apart from its entries, except a line end
    followed by the indentation of its own line (what `append` adds to an empty one)."""
    items, gone = node.items, sorted(set(indices))
    if not gone:
        return []
    if len(gone) == len(items):
        end, outer = items[-1].end, _line_indent(text, node.start)
        if text[end:node.end - 1] in ("\n" + outer, "\r\n" + outer):
            end = node.end - 1
        return [(node.start + 1, end, "")]
    splices = []
    for first, last in _runs(gone):
        if first > 0:
            splices.append((items[first - 1].end, items[last].end, ""))
        else:
            splices.append((items[0].start, items[last + 1].start, ""))
    return splices


def _runs(indices: list[int]) -> Iterator[tuple[int, int]]:
    """Consecutive stretches of sorted indices, as (first, last)."""
    start = prev = indices[0]
    for i in indices[1:]:
        if i != prev + 1:
            yield start, prev
            start = i
        prev = i
    yield start, prev


def apply(text: str, splices: Iterable[Splice]) -> str:
    """The text with non-overlapping splices made."""
    for start, end, new in sorted(splices, reverse=True):
        text = text[:start] + new + text[end:]
    return text
