"""The web console's token: random, kept 0600 in the profile's data directory, reused until replaced."""

from __future__ import annotations

import hmac
import os
import re
import secrets
import stat
from pathlib import Path

from ..paths import Paths, private_dir

TOKEN_FILE = "web-token"
TOKEN_BYTES = 32  # 256 bits, 43 url-safe characters
_SHAPE = re.compile(r"[A-Za-z0-9_-]{32,128}")


class TokenError(OSError):
    """The token file cannot be read or written; the message is one line."""


def token_path(paths: Paths) -> Path:
    return paths.data / TOKEN_FILE


def load_token(paths: Paths, *, new: bool = False) -> tuple[str, bool]:
    """The profile's web token and whether it was made now: the stored one, unless `new`, or it is missing,
    malformed, not ours or readable by others (then a fresh one replaces it)."""
    path = token_path(paths)
    try:
        private_dir(paths.data)
    except OSError as exc:
        raise TokenError(f"cannot use the data directory {paths.data}: {exc.strerror or exc}") from None
    if not new:
        token = _read(path)
        if token:
            return token, False
    token = secrets.token_urlsafe(TOKEN_BYTES)
    _write(path, token)
    return token, True


def _read(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None  # someone else's, or others could have read it: not a secret any more
        text = os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return text if _SHAPE.fullmatch(text) else None


def _write(path: Path, token: str) -> None:
    """Write 0600 from the start (never readable by others, even for a moment), then rename over the old one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, (token + "\n").encode())
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise TokenError(f"cannot write the web token to {path}: {exc.strerror or exc}") from None


def token_matches(given: str | None, token: str) -> bool:
    """Whether `given` is the token, in constant time (a timing difference would leak it byte by byte)."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())
