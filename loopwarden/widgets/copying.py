"""Copy what a view shows: to the terminal's clipboard (OSC 52) and, always, to a file only its owner can read.

Many terminals ignore OSC 52 (or cap it), so the file is the copy that is sure to be there; the notification
names it. The text is made visible first (`visible_lines`): an escape sequence an agent printed lands in the
clipboard as the characters `\\x1b[...`, never as a sequence the terminal acts on.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from textual.app import App

from ..paths import Paths, default_paths, private_dir
from ..supervisor.visible import visible_lines

MAX_CHARS = 1 << 20  # copied at most; a longer text is cut and says so
COPY_FILE = "copied.txt"


@dataclass(frozen=True, slots=True)
class CopyTarget:
    """What to copy: a few words for the notification, and the text."""

    what: str
    text: str


def copy_file(paths: Paths | None = None) -> Path:
    """The file the copies go to: `copied.txt` in the data directory of the console's profile."""
    return private_dir((paths or default_paths()).data) / COPY_FILE


def prepared(text: str) -> str:
    """The text as it is copied: controls made visible, at most MAX_CHARS."""
    text = visible_lines(text)
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS] + f"\n… [cut: {len(text):,} characters, the first {MAX_CHARS:,} copied]"
    return text


def spilled_text(path: str) -> str:
    """A spill file's first MiB, or what says why it cannot be read."""
    try:
        with open(path, "rb") as file:
            return file.read(MAX_CHARS).decode("utf-8", errors="replace")
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"


def write_private(path: Path, text: str) -> None:
    """Write `text` as a new 0600 file renamed over `path`: a link left at `path` (hard or symbolic, by anything
    running as this user) is replaced, never written through, and a reader never sees half a copy."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # 0600, O_EXCL
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def copy_out(app: App[object], target: CopyTarget, paths: Paths | None = None) -> Path | None:
    """Copy `target` both ways and say where; None (said) when the file cannot be written."""
    text = prepared(target.text)
    app.copy_to_clipboard(text)
    try:
        path = copy_file(paths)
        write_private(path, text)
    except OSError as exc:
        app.notify(f"copied {target.what} to the terminal's clipboard only: cannot write the copy file ({exc})",
                   severity="warning", markup=False)
        return None
    app.notify(f"copied {target.what} ({len(text):,} characters): in the clipboard if the terminal allows "
               f"(OSC 52), and in {path}", timeout=6, markup=False)
    return path
