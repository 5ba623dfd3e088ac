"""One line of the sessions table: its cells laid out in their columns, styled, as a Strip."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from .grouping import GROUP_COLUMN
from .selection import MARK


class Laid(Protocol):
    """A column as a line needs it: its key and the width of its content."""

    name: str
    content_width: int


class Cells(Protocol):
    """A row as a line needs it: its cells by column key."""

    cells: dict[str, Text]


def cells_line(columns: Sequence[Laid], cells: list[Text], styles: tuple[Style, Style | None], width: int,
               console: Console) -> Strip:
    """`cells` padded (or cut) to their columns' widths, one space apart, in `styles` (the row's style, and
    one applied over the cells' own), filled to `width`."""
    line = Text(end="", no_wrap=True)
    for column, cell in zip(columns, cells, strict=True):
        line.append(" ")
        pad = column.content_width - cell.cell_len
        if pad < 0:
            cell = cell.copy()
            cell.truncate(column.content_width)
            pad = column.content_width - cell.cell_len
        line.append_text(cell)
        line.append(" " * (pad + 1))
    style, post = styles
    segments = list(Segment.apply_style(line.render(console), style, post))
    length = line.cell_len
    if length < width:
        segments.append(Segment(" " * (width - length), style))
    return Strip(segments, max(length, width))


def drawn_cell(row: Cells, name: str, marked: bool, group: Text | None) -> Text:
    """A row's cell as drawn: the GROUP label on a group's first row, the mark beside a marked row's id."""
    if name == GROUP_COLUMN[0]:
        return group or Text("")
    cell = row.cells[name]
    return marked_id(cell) if marked and name == "id" else cell


def marked_id(cell: Text) -> Text:
    """The ID cell with the mark in its second place (the first is ! for a session waiting for a human)."""
    out = cell.copy()
    out.plain = out.plain[:1] + MARK + out.plain[2:]
    return out
