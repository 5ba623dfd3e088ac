"""Editing a user's dotfile: through its symlinks, atomically, with a new backup each time.

A settings file is often a link into a dotfiles repository. The edit goes to the file the link
names (a chain of links, or a linked directory, is followed to the end): a temporary file beside
that target, with its permission bits, written, synced and renamed over it, so the link stays a
link and a reader never sees half a file. A link that names nothing is refused rather than
replaced by a new file. Before each change the previous bytes go to a new backup beside the
target, `NAME.loopwarden-<UTC time>.bak` (`-2`, `-3`, ... when one already has that name), mode
0600; an earlier backup is never replaced. The text is decoded without translating line ends, so
CRLF stays CRLF; a UTF-8 byte order mark is kept.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from .common import Fail

BOM = codecs.BOM_UTF8


@dataclass(frozen=True)
class Dotfile:
    """One file as read: `text` is its content without the byte order mark ("" when it does not exist)."""

    path: Path  # as the user names it: maybe a link
    target: Path  # the file that is read and replaced
    raw: bytes | None  # None: no file yet
    text: str
    bom: bool

    @property
    def exists(self) -> bool:
        return self.raw is not None


def newline_of(text: str) -> str:
    """The line end a text mostly uses: "\\r\\n" or "\\n" (a tie, or none, is "\\n")."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf > text.count("\n") - crlf else "\n"


def target_of(path: Path) -> Path:
    """The file `path` names once every symlink in it is followed; a dangling link or a loop is a Fail."""
    path = path.absolute()
    for part in (path, *path.parents):
        if part.is_symlink() and not part.exists():
            try:
                os.stat(part)
            except FileNotFoundError:
                raise Fail(f"{part} is a symbolic link to {os.readlink(part)}, which does not exist; create "
                           "that file or remove the link; nothing was changed") from None
            except OSError as exc:  # a loop
                raise Fail(f"cannot follow the symbolic link {part}: {exc.strerror or exc}; nothing was "
                           "changed") from None
    return Path(os.path.realpath(path))


def load(path: Path) -> Dotfile:
    """`path` as text; not readable or not UTF-8 is a Fail that names it."""
    target = target_of(path)
    try:
        raw: bytes | None = target.read_bytes()
    except FileNotFoundError:
        raw = None
    except OSError as exc:
        raise Fail(f"cannot read {path}: {exc.strerror or exc}; nothing was changed") from None
    if raw is None:
        return Dotfile(path, target, None, "", False)
    bom = raw.startswith(BOM)
    try:
        text = raw[len(BOM) if bom else 0:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Fail(f"{path} is not UTF-8 text (byte {exc.start}); nothing was changed") from None
    return Dotfile(path, target, raw, text, bom)


def save(file: Dotfile, text: str) -> Path | None:
    """Replace the file with `text` (atomically, in the target's directory), after a backup of the old
    bytes, whose path is returned (None for a new file). A file changed since `load` is a Fail."""
    target = file.target
    data = (BOM if file.bom else b"") + text.encode("utf-8")
    try:
        if not file.exists:
            target.parent.mkdir(parents=True, exist_ok=True)
        backup = _backup(target, file.raw) if file.raw is not None else None
        try:
            _replace(file, data)
        except BaseException:
            if backup:
                backup.unlink()
            raise
    except OSError as exc:
        raise Fail(f"cannot write {exc.filename or target}: {exc.strerror or exc}; nothing was changed") from None
    return backup


def backups(file: Dotfile) -> list[Path]:
    """The backups loopwarden made of this file, newest first."""
    found = file.target.parent.glob(f"{glob_escape(file.target.name)}.loopwarden-*.bak")
    return sorted(found, key=_written, reverse=True)


def _written(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def _backup(target: Path, raw: bytes) -> Path:
    """A new file beside `target` holding `raw`, mode 0600; never an existing one."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1, 1000):
        backup = target.with_name(f"{target.name}.loopwarden-{stamp}{'' if n == 1 else f'-{n}'}.bak")
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        try:
            _write_all(fd, raw)
        except BaseException:
            os.close(fd)
            backup.unlink()
            raise
        os.close(fd)
        return backup
    raise Fail(f"too many backups of {target} in one second; nothing was changed")


def _replace(file: Dotfile, data: bytes) -> None:
    """Write `data` to a temporary file beside the target, with its mode, and rename it over the target."""
    target = file.target
    old = os.stat(target) if file.exists else None
    tmp = target.with_name(f".{target.name}.loopwarden-{os.getpid()}-{time.monotonic_ns()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600 if old else 0o666)
    try:
        try:
            if old:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                    with contextlib.suppress(OSError):  # only root can give a file away; the mode is kept anyway
                        os.fchown(fd, old.st_uid, old.st_gid)
            _write_all(fd, data)
        finally:
            os.close(fd)
        if _current(target) != file.raw:
            raise Fail(f"{file.path} changed while loopwarden was editing it; nothing was changed, try again")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _sync_directory(target.parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def _current(target: Path) -> bytes | None:
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None


def _sync_directory(directory: Path) -> None:
    """Make the rename durable; a file system that cannot sync a directory still has the new file."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
