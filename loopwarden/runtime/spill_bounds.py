"""How many bytes of spill files one session, and all the sessions of a daemon together, may write.

`spill.max_session_bytes` bounds what one session writes over its life, `spill.max_total_bytes` what lies in
the spill directories in all (the daemon measures them once at its start, then counts every byte written and
every file removed); 0 is no bound. An output that meets a bound is written up to it and ends with a marker
line saying how many bytes were cut and why. With less than MIN_KEPT bytes of room no file is made for an
output at all: the agent gets its preview and the path of one small notice file per session saying why, so
outputs past the bound cost neither bytes nor files. Every cut byte is counted.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the CLI imports this module: the config module costs `ls` more than it lists)
    from ..supervisor.config import Spill

MIN_KEPT = 4096  # less room than this left: the output gets no file of its own
CHUNK_CHARS = 1 << 20
ENCODING_ERRORS = "replace"
SESSION_KEY = "spill.max_session_bytes"
TOTAL_KEY = "spill.max_total_bytes"


def size_words(n: int) -> str:
    """1 MiB, 256 MiB, 1.5 GiB, 812 bytes."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{round(n / size, 1):g} {unit}"
    return f"{n} bytes"


def byte_length(text: str) -> int:
    """The bytes `text` takes in a spill file (UTF-8, a lone surrogate as '?'), counted a slice at a time."""
    if text.isascii():
        return len(text)
    return sum(len(text[i:i + CHUNK_CHARS].encode("utf-8", ENCODING_ERRORS)) for i in range(0, len(text), CHUNK_CHARS))


def _utf8_prefix(data: bytes, n: int) -> bytes:
    """The first `n` bytes of `data` or fewer, never ending inside a character."""
    if n >= len(data):
        return data
    end = n
    while end > 0 and data[end] & 0xC0 == 0x80:  # data[end] continues the character begun before it
        end -= 1
    return data[:end]


class SpillLedger:
    """The bytes of the spill files a daemon's sessions share the total bound over: those on disk at its start,
    plus every byte written since, less every file removed; and what was cut, all sessions together."""

    def __init__(self, limit: int = 0) -> None:
        self.used = 0
        self.limit = limit  # the daemon's own spill.max_total_bytes, for `status` (each session applies its own)
        self.cut_bytes = 0
        self.cut_outputs = 0

    def measure(self, directories: Iterable[str]) -> int:
        """Add the spill files in `directories` (once, at the daemon's start); the bytes found."""
        from .spill import is_spill_name  # (spill.py imports this module)

        found = 0
        for directory in set(directories):
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        if is_spill_name(entry.name):
                            try:
                                st = entry.stat(follow_symlinks=False)
                            except OSError:
                                continue
                            if stat.S_ISREG(st.st_mode):
                                found += st.st_size
            except OSError:
                continue
        self.used += found
        return found

    def add(self, n: int) -> None:
        self.used += n

    def release(self, n: int) -> None:
        self.used = max(0, self.used - n)

    def health(self) -> dict[str, Any]:
        return {"bytes": self.used, "max_total_bytes": self.limit, "cut_bytes": self.cut_bytes,
                "cut_outputs": self.cut_outputs}


@dataclass
class SpillBounds:
    """One session's spill bytes against its bounds (0: none), and what was cut of its outputs."""

    max_session_bytes: int = 0
    max_total_bytes: int = 0
    ledger: SpillLedger | None = None
    written: int = 0  # bytes of spill files this session wrote (its notice and markers too), over its life
    cut_bytes: int = 0
    cut_outputs: int = 0
    notice: str | None = None  # the file that says why outputs past the bound got none

    @classmethod
    def of(cls, spill: Spill, ledger: SpillLedger | None) -> SpillBounds:
        """The bounds a config's `spill` section sets."""
        return cls(spill.max_session_bytes, spill.max_total_bytes, ledger)

    def room(self) -> tuple[int | None, str]:
        """The bytes that may still be written, and the key of the bound that leaves the least (None: no bound)."""
        room: int | None = None
        key = ""
        if self.max_session_bytes > 0:
            room, key = max(0, self.max_session_bytes - self.written), SESSION_KEY
        if self.max_total_bytes > 0 and self.ledger is not None:
            total = max(0, self.max_total_bytes - self.ledger.used)
            if room is None or total < room:
                room, key = total, TOTAL_KEY
        return room, key

    def reason(self, key: str) -> str:
        if key == SESSION_KEY:
            return f"this session's spill files reached {SESSION_KEY} ({size_words(self.max_session_bytes)})"
        return f"the spill files of all sessions reached {TOTAL_KEY} ({size_words(self.max_total_bytes)})"

    def wrote(self, n: int) -> None:
        self.written += n
        if self.ledger is not None:
            self.ledger.add(n)

    def unwrote(self, n: int) -> None:
        """A file of this session was removed before it was handed over (discarded, or its write failed)."""
        self.written = max(0, self.written - n)
        if self.ledger is not None:
            self.ledger.release(n)

    def count_cut(self, n: int) -> None:
        self.cut_bytes += n
        self.cut_outputs += 1
        if self.ledger is not None:
            self.ledger.cut_bytes += n
            self.ledger.cut_outputs += 1

    def to_dict(self) -> dict[str, int]:
        return {"bytes": self.written, "cut_bytes": self.cut_bytes, "cut_outputs": self.cut_outputs,
                "max_session_bytes": self.max_session_bytes, "max_total_bytes": self.max_total_bytes}


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class BoundedWriter:
    """Writes one output to its spill file a slice at a time while the bounds leave room; past that it only
    counts the bytes it cuts, and `end` adds the marker line."""

    def __init__(self, fd: int, bounds: SpillBounds) -> None:
        self.fd = fd
        self.bounds = bounds
        self.kept = 0  # bytes of the output written
        self.written = 0  # ... and of the marker
        self.cut = 0
        self.key = ""  # the bound that cut it, once one has

    def write(self, text: str) -> None:
        """Raises OSError; what was written is already counted."""
        for start in range(0, len(text), CHUNK_CHARS):
            piece = text[start:start + CHUNK_CHARS]
            if self.key:
                self.cut += byte_length(piece)
                continue
            data = piece.encode("utf-8", ENCODING_ERRORS)
            room, key = self.bounds.room()
            if room is not None and len(data) > room:
                kept = _utf8_prefix(data, room)
                self.cut += len(data) - len(kept)
                self.key = key
                data = kept
            self._put(data)
            self.kept += len(data)

    def _put(self, data: bytes) -> None:
        write_all(self.fd, data)
        self.written += len(data)
        self.bounds.wrote(len(data))

    def end(self) -> None:
        """The marker line, when the output was cut (raises OSError)."""
        if self.cut:
            self._put(marker(self.cut, self.bounds.reason(self.key)).encode())

    def cut_note(self) -> str | None:
        """What the agent is told of the cut, or None."""
        if not self.cut:
            return None
        return (f"Only its first {self.kept:,} bytes were saved; the last {self.cut:,} bytes were cut: "
                f"{self.bounds.reason(self.key)}.")


def marker(cut: int, reason: str) -> str:
    return f"\n[... loopwarden cut this output here: {cut:,} more bytes were not written: {reason}]\n"


def notice_text(reason: str) -> str:
    return (f"[loopwarden writes no more of this session's large outputs to files: {reason}. Each output past the "
            "bound was cut whole; the agent got its preview, and `loopwarden status` counts the bytes cut.]\n")
