"""Writing oversized tool outputs to private spill files and telling the agent where they are.

Safety rules:

* the spill directory is 0700, must be a real directory owned by us, and is
  opened with O_NOFOLLOW; files are created relative to that descriptor with
  O_EXCL|O_NOFOLLOW and forced to 0600 whatever the umask;
* file names are built from slugs of the session and tool names plus a
  sequence number, so no name can escape the directory or collide silently;
* the text is encoded and written in slices, never whole; lone surrogates are
  encoded with errors="replace" (each becomes "?"), so the file is valid UTF-8;
* the bytes written are bounded per session and in total (spill_bounds.py): an
  output that meets a bound is cut there with a marker line, and past it no file
  is made at all (the agent gets its preview and a notice's path);
* any OSError falls back to `truncate_with_warning`'s text and removes a
  partially written file.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from typing import Any

import platformdirs

from ..supervisor.events import SpillResult
from .spill_bounds import ENCODING_ERRORS, MIN_KEPT, BoundedWriter, SpillBounds, byte_length, notice_text, write_all

MAX_TRIES = 100
SLUG_MAX = 48
_ENCODING_ERRORS = ENCODING_ERRORS

_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9._-]+")
_SLUG = r"[A-Za-z0-9][A-Za-z0-9._-]{0,%d}" % (SLUG_MAX - 1)  # noqa: UP031 - clearer than {{0,{...}}} in an f-string
_NAME = re.compile(rf"{_SLUG}-[0-9]{{7,}}-{_SLUG}(?:-[0-9]+)?\.txt")

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC


class UnsafeSpillDir(OSError):
    """The spill directory exists but is a symlink, not a directory, or not ours."""


def slug(name: str, fallback: str) -> str:
    """Reduce `name` to at most 48 of [A-Za-z0-9._-], not starting with '.', '_' or '-'."""
    cleaned = _UNSAFE_RUN.sub("_", name).lstrip("._-")[:SLUG_MAX]
    return cleaned or fallback


def is_spill_name(name: str) -> bool:
    """Whether `name` is a file name this module could have produced."""
    return _NAME.fullmatch(name) is not None


def human_duration(seconds: float) -> str:
    """Render a duration compactly: 90 -> '1.5m', 86400 -> '24h', 7 days -> '7d'."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= (2 * size if unit == "d" else size):
            return f"{round(seconds / size, 1):g}{unit}"
    return f"{round(max(seconds, 0.0), 1):g}s"


def truncate_with_warning(text: str, max_chars: int) -> str:
    """The fallback when no spill file can be written: the first `max_chars` characters plus a TRUNCATED note."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n\n[TRUNCATED: Response was {len(text)} characters, showing first {max_chars}]"


def _euid() -> int:
    return os.geteuid()


def _lstat(name: str, dir_fd: int) -> os.stat_result:
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


class Spiller:
    """Spills oversized outputs into one private directory and cleans up old spill files."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | None,
        *,
        preview_chars: int = 1000,
        truncate_chars: int = 200_000,
        retention: float = 24 * 3600,
        session: str = "session",
        bounds: SpillBounds | None = None,
    ) -> None:
        """Remember the settings (no bound on bytes without `bounds`); the directory is only touched by
        spill() and cleanup()."""
        if not directory:
            directory = os.path.join(platformdirs.user_cache_dir("loopwarden"), "spill")
        self.directory = os.path.abspath(os.fspath(directory))
        self.preview_chars = max(0, preview_chars)
        self.truncate_chars = max(0, truncate_chars)
        self.retention = retention
        self.session_slug = slug(session, "session")
        self.bounds = bounds or SpillBounds()
        self.freed = 0  # bytes of the files cleanup() removed

    def spill(self, text: str, *, tool: str | None, seq: int, now: float) -> SpillResult:
        """Write `text` to a new spill file (mtime `now`, wall-clock) or fall back to truncation."""
        if seq < 0:
            raise ValueError(f"seq must be >= 0, got {seq}")
        base = f"{self.session_slug}-{seq:07d}-{slug(tool or '', 'tool')}"
        preview = text[: self.preview_chars].encode("utf-8", _ENCODING_ERRORS).decode("utf-8")
        room, key = self.bounds.room()
        if room is not None and room < MIN_KEPT:
            return self.cut_whole(len(text), byte_length(text), preview, key, base, now)
        try:
            path, writer = self._write(text, base, now)
        except OSError as exc:
            return self._fallback(text, preview, tool, exc)
        if writer.cut:
            self.bounds.count_cut(writer.cut)
        return SpillResult(path, len(text), preview, self._message(path, len(text), preview, writer.cut_note()),
                           None, writer.cut)

    def cut_whole(self, size: int, nbytes: int, preview: str, key: str, base: str, now: float) -> SpillResult:
        """An output of `size` characters (`nbytes` bytes) past a bound: no file of its own, counted as cut; the
        agent gets its preview and the path of the session's notice saying why (written once)."""
        self.bounds.count_cut(nbytes)
        reason = self.bounds.reason(key)
        path = self.bounds.notice
        if path is None or not os.path.isfile(path):
            try:
                path = self.bounds.notice = self._write_notice(notice_text(reason), base, now)
            except OSError:
                path = None
        message = (f"Tool response too large ({size} characters), and none of it was saved: {reason}."
                   + (f" (Why, in a file: {path})" if path else "") + "\n\n"
                   "Only the preview below is left: ask for a smaller part of the output (head, tail, grep).\n\n"
                   f"Preview (first {len(preview)} chars):\n{preview}...")
        return SpillResult(path, size, preview, message, None, nbytes, saved=False)

    def _write_notice(self, text: str, base: str, now: float) -> str:
        dir_fd = self._open_dir(create=True)
        try:
            name, fd = self._create(base, dir_fd)
            try:
                os.fchmod(fd, 0o600)
                data = text.encode()
                write_all(fd, data)
                self.bounds.wrote(len(data))
                os.utime(fd, (now, now))
            finally:
                os.close(fd)
        finally:
            os.close(dir_fd)
        return os.path.join(self.directory, name)

    def stream(self, *, tool: str | None, seq: int) -> SpillStream:
        """A spill file written as an output arrives (a long line read in chunks), kept or discarded after."""
        return SpillStream(self, f"{self.session_slug}-{seq:07d}-{slug(tool or '', 'tool')}")

    def cleanup(self, now: float, only: Callable[[str], bool] | None = None) -> int:
        """Remove our regular spill files with mtime before now - retention (those `only` accepts, if
        given); return how many."""
        try:
            dir_fd = self._open_dir(create=False)
        except OSError:
            return 0
        removed = 0
        try:
            with os.scandir(dir_fd) as entries:
                names = [entry.name for entry in entries if is_spill_name(entry.name)
                         and (only is None or only(entry.name))]
            cutoff = now - self.retention
            for name in names:
                removed += self._remove_if_old(name, dir_fd, cutoff)
        except OSError:
            pass
        finally:
            os.close(dir_fd)
        return removed

    def _remove_if_old(self, name: str, dir_fd: int, cutoff: float) -> int:
        try:
            st = _lstat(name, dir_fd)
            if not stat.S_ISREG(st.st_mode) or st.st_mtime >= cutoff:
                return 0
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            return 0
        self.freed += st.st_size
        return 1

    def _message(self, path: str, size: int, preview: str, cut: str | None = None) -> str:
        saved = f"Full output saved to: {path}" if cut is None else f"Output saved to: {path}\n{cut}"
        return (
            f"Tool response too large ({size} characters). {saved}\n"
            "\n"
            "To examine the output:\n"
            "- Use read_file tool to view the file\n"
            "- Use grep tool to search within the file\n"
            f"- The file will be deleted after {human_duration(self.retention)}\n"
            "\n"
            f"Preview (first {len(preview)} chars):\n"
            f"{preview}..."
        )

    def _fallback(self, text: str, preview: str, tool: str | None, exc: OSError) -> SpillResult:
        shown = min(len(text), self.truncate_chars)
        warning = _one_line(
            f"spill of {tool or 'tool'} output ({len(text)} chars) to {self.directory} failed: {exc}; "
            f"truncated to the first {shown} chars"
        )
        return SpillResult(None, len(text), preview, truncate_with_warning(text, self.truncate_chars), warning)

    def _write(self, text: str, base: str, now: float) -> tuple[str, BoundedWriter]:
        dir_fd = self._open_dir(create=True)
        try:
            name, fd = self._create(base, dir_fd)
            writer = BoundedWriter(fd, self.bounds)
            try:
                os.fchmod(fd, 0o600)
                writer.write(text)
                writer.end()
                os.utime(fd, (now, now))
            except BaseException:
                os.close(fd)
                _unlink_quietly(name, dir_fd)
                self.bounds.unwrote(writer.written)
                raise
            os.close(fd)
        finally:
            os.close(dir_fd)
        return os.path.join(self.directory, name), writer

    def _create(self, base: str, dir_fd: int) -> tuple[str, int]:
        for attempt in range(1, MAX_TRIES + 1):
            name = f"{base}.txt" if attempt == 1 else f"{base}-{attempt}.txt"
            try:
                return name, os.open(name, _FILE_FLAGS, 0o600, dir_fd=dir_fd)
            except FileExistsError:
                continue
        raise FileExistsError(f"no free spill file name for {base} after {MAX_TRIES} tries")

    def _open_dir(self, *, create: bool) -> int:
        if create:
            _make_private_dirs(self.directory)
        st = os.lstat(self.directory)
        _check_dir(self.directory, st)
        fd = os.open(self.directory, _DIR_FLAGS)
        try:
            fst = os.fstat(fd)
            if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                raise UnsafeSpillDir(f"spill directory {self.directory} changed while being opened")
            if stat.S_IMODE(fst.st_mode) & 0o077:
                os.fchmod(fd, 0o700)
        except BaseException:
            os.close(fd)
            raise
        return fd


def _check_dir(path: str, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeSpillDir(f"spill directory {path} is a symlink; refusing to write there")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeSpillDir(f"spill directory {path} is not a directory")
    if st.st_uid != _euid():
        raise UnsafeSpillDir(
            f"spill directory {path} is owned by uid {st.st_uid}, not {_euid()}; refusing to write there"
        )


def _make_private_dirs(path: str) -> None:
    """Create `path` and any missing parents with mode 0700, whatever the umask."""
    missing: list[str] = []
    while not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue
        os.chmod(directory, 0o700)


def _unlink_quietly(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def spill_event(event: Any, verdict: Any, spiller: Spiller | None, *, threshold: int, preview_chars: int,
                now: float) -> SpillResult:
    """Carry out a spill verdict on its tool_result: write the file (or truncate when there is no
    spiller), give the verdict the agent's text and the evidence, and keep only that text in the event."""
    if spiller is None:
        result = SpillResult(None, len(event.output), event.output[:preview_chars],
                             truncate_with_warning(event.output, threshold), "no spill directory configured")
    else:
        result = spiller.spill(event.output, tool=event.tool, seq=event.seq, now=now)
    return _carried_out(event, verdict, result)


def spill_streamed(event: Any, verdict: Any, stream: SpillStream, *, now: float) -> SpillResult:
    """Carry out a spill verdict on a tool_result whose output was written to `stream` as it arrived (a long
    line: `event.output` is its first part, `event.size` its length): keep the file, as spill_event would."""
    return _carried_out(event, verdict, stream.finish(event.size, event.output, event.tool, now))


def _carried_out(event: Any, verdict: Any, result: SpillResult) -> SpillResult:
    verdict.message = result.message
    verdict.evidence.update(path=result.path, size=result.size)
    if result.cut:
        verdict.evidence.update(cut_bytes=result.cut, saved=result.saved)
    if result.warning:
        verdict.evidence["warning"] = result.warning
    event.output = result.message  # the full text lives in the spill file, not in memory
    return result


class SpillStream:
    """One spill file written piece by piece; `finish` keeps it (as `Spiller.spill` would), `discard` removes it.
    With no room left under the spill bounds no file is made: the pieces are only counted."""

    def __init__(self, spiller: Spiller, base: str) -> None:
        self.spiller = spiller
        self.base = base
        self.error: OSError | None = None
        self.name: str | None = None
        self.writer: BoundedWriter | None = None
        self.whole = ""  # the bound that leaves no room for this output: it is cut whole
        self.whole_bytes = 0
        self._fd = self._dir_fd = -1
        room, key = spiller.bounds.room()
        if room is not None and room < MIN_KEPT:
            self.whole = key
            return
        try:
            self._dir_fd = spiller._open_dir(create=True)
            self.name, self._fd = spiller._create(base, self._dir_fd)
            self.writer = BoundedWriter(self._fd, spiller.bounds)
            os.fchmod(self._fd, 0o600)
        except OSError as exc:
            self._fail(exc)

    def write(self, text: str) -> None:
        if self.whole:
            self.whole_bytes += byte_length(text)
        elif self.error is None and self.writer is not None:
            try:
                self.writer.write(text)
            except OSError as exc:
                self._fail(exc)

    def finish(self, size: int, head: str, tool: str | None, now: float) -> SpillResult:
        """The spill result for an output of `size` characters that starts with `head`."""
        spiller = self.spiller
        preview = head[: spiller.preview_chars].encode("utf-8", _ENCODING_ERRORS).decode("utf-8")
        if self.whole:
            return spiller.cut_whole(size, self.whole_bytes, preview, self.whole, self.base, now)
        writer = self.writer
        if self.error is None and self.name is not None and writer is not None:
            try:
                writer.end()
                os.utime(self._fd, (now, now))
            except OSError as exc:
                self._fail(exc)
        if self.error is not None or self.name is None or writer is None:
            shown = min(size, spiller.truncate_chars)
            warning = _one_line(f"spill of {tool or 'tool'} output ({size} chars) to {spiller.directory} failed: "
                                f"{self.error}; truncated to the first {shown} chars")
            message = head[:shown] + (f"\n\n[TRUNCATED: Response was {size} characters, showing first {shown}]"
                                      if size > shown else "")
            self._close()
            return SpillResult(None, size, preview, message, warning)
        path = os.path.join(spiller.directory, self.name)
        self._close()
        if writer.cut:
            spiller.bounds.count_cut(writer.cut)
        return SpillResult(path, size, preview, spiller._message(path, size, preview, writer.cut_note()), None,
                           writer.cut)

    def discard(self) -> None:
        self._remove()
        self._close()

    def _fail(self, exc: OSError) -> None:
        self.error = exc
        self._remove()
        self.name = None

    def _remove(self) -> None:
        """The file goes, and its bytes leave the bounds' count."""
        if self.name is not None and self._dir_fd >= 0:
            _unlink_quietly(self.name, self._dir_fd)
        if self.writer is not None:
            self.spiller.bounds.unwrote(self.writer.written)
            self.writer = None

    def _close(self) -> None:
        for fd in (self._fd, self._dir_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._dir_fd = -1
