"""The console's saved view: how the operator left the sessions table (group, sort, filter, hide-ended).

Kept per user in an owner-only JSON file under the state directory (`Paths.console_view`), written when
the view changes and read when a console starts. A file that cannot be read or makes no sense gives the
defaults and one line saying so, never a crash.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from textual.widgets import Input

from ..paths import UnsafeDirectory, private_dir
from .grouping import GROUPS
from .session_table import SORTS, SessionTable

FILTER_CHARS = 200
MAX_BYTES = 4096  # a view is a few dozen bytes: anything larger was not written by a console


@dataclass(frozen=True)
class View:
    group_by: str | None = None
    sort_by: str = "id"
    sort_reverse: bool = False
    filter_text: str = ""
    hide_ended: bool = False

    @classmethod
    def of(cls, table: SessionTable) -> View:
        return cls(table.group_by, table.sort_by, table.sort_reverse, table.filter_text, table.hide_ended)

    @classmethod
    def parse(cls, data: Any) -> View:
        """The view a file's JSON describes; ValueError naming the first thing wrong."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        view = cls(**{k: data[k] for k in asdict(cls()) if k in data})
        if view.group_by is not None and view.group_by not in GROUPS:
            raise ValueError(f"unknown group_by {str(view.group_by)[:40]!r}")
        if view.sort_by not in SORTS:
            raise ValueError(f"unknown sort_by {str(view.sort_by)[:40]!r}")
        if not isinstance(view.filter_text, str) or len(view.filter_text) > FILTER_CHARS \
                or not view.filter_text.isprintable():
            raise ValueError("filter_text is not one short line of text")
        if not isinstance(view.sort_reverse, bool) or not isinstance(view.hide_ended, bool):
            raise ValueError("sort_reverse and hide_ended must be true or false")
        return view


def load(path: Path) -> tuple[View, str | None]:
    """The saved view (defaults when there is none), and a line to show when the file was unusable."""
    try:
        text = _read(path)
    except FileNotFoundError:
        return View(), None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = str(exc)[:120] if isinstance(exc, ValueError) else type(exc).__name__
        return View(), f"saved console view {path} not read ({why}); using the defaults"
    try:
        return View.parse(json.loads(text)), None
    except (ValueError, TypeError, RecursionError) as exc:
        why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        return View(), f"saved console view {path} is not usable ({why}); using the defaults"


def _read(path: Path) -> str:
    """The file's text: never through a symlink, never waiting on a FIFO or device, never more than MAX_BYTES."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = file.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES} bytes")
    return data.decode("utf-8")


def save(path: Path, view: View) -> str | None:
    """Write the view owner-only (0600 in a 0700 directory), replacing the file at once; a line on failure."""
    try:
        private_dir(path.parent)
        # a name of its own (mkstemp: 0600, O_EXCL), so two consoles saving at once never share one
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(asdict(view), out)
            os.replace(temporary, path)
        except OSError:
            Path(temporary).unlink(missing_ok=True)
            raise
    except (OSError, UnsafeDirectory) as exc:
        return f"console view not saved to {path}: {exc.strerror or exc}" if isinstance(exc, OSError) else str(exc)
    return None


class ViewKeeper:
    """Applies the saved view to a new table, then saves the table's view whenever it changes."""

    def __init__(self, path: Path, *, writes: bool = True) -> None:
        self.path = path
        self.writes = writes  # False for a read-only console: a viewer's arranging is not the operator's view
        self.saved: View | None = None
        self.failed = False

    def restore(self) -> tuple[View, str | None]:
        view, problem = load(self.path)
        self.saved = view
        return view, problem

    def keep(self, table: SessionTable) -> str | None:
        """Save the table's view if it changed since the last save; a line to show when it could not be (once)."""
        view = View.of(table)
        if view == self.saved:
            return None
        self.saved = view
        problem = save(self.path, view) if self.writes else None
        if problem and not self.failed:
            self.failed = True
            return problem
        return None


def restore(keeper: ViewKeeper, table: SessionTable, box: Input, say: Callable[..., object]) -> None:
    """Put the saved view on a new sessions table and its filter line; say so when the file was unusable."""
    view, problem = keeper.restore()
    table.hide_ended = view.hide_ended
    table.resort({}, view.sort_by, view.sort_reverse)
    table.regroup({}, view.group_by)
    if view.filter_text:
        box.value = view.filter_text  # the filter line's change handler filters the table
        box.display = True
    if problem:
        say(problem, severity="warning", markup=False)
