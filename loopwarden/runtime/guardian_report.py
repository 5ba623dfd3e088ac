"""The guardian's report: what it did when its daemon died, left for the next daemon to read.

One small private file per daemon, `guardian-PID.START.json` in the profile's data directory (0600, in the
0700 directory; replaced whole by a rename, never written in place). The guardian writes it when it starts
(`state: guarding`, its own pid and start time), when it sees the daemon die (`stopping`: the time, and per
session the processes it found alive and the bytes left unread in the agent's stdout pipe), and when it is
done (`done`: when it sent SIGTERM and SIGKILL, and per session what survived). On a clean stop with
nothing left to stop it removes the file. The next daemon reads every report but its own guardian's
(lost.py), waits for a guardian still at work, and removes a report once it is settled.

Standard library only: the guardian imports it.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import struct
import termios
from typing import Any

REPORT_ENV = "LOOPWARDEN_GUARDIAN_REPORT"  # "DAEMON_PID.START:DATA_DIR", in the guardian's environment
PREFIX = "guardian-"
SUFFIX = ".json"
MAX_BYTES = 4 << 20  # a report read is at most this (a report of a thousand sessions is ~200 KB)
PIDS_LISTED = 32  # processes named per session; the count is whole
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK


def path_of(directory: str, instance: str) -> str:
    return os.path.join(directory, f"{PREFIX}{instance}{SUFFIX}")


def write(directory: str, instance: str, report: dict[str, Any], *, durable: bool = False) -> bool:
    """Replace the report of daemon `instance` whole (a temporary file renamed over it); False on failure."""
    final = path_of(directory, instance)
    temporary = os.path.join(directory, f".{PREFIX}{instance}.{os.getpid()}.tmp")
    try:
        try:
            os.unlink(temporary)  # a leftover of a guardian with this pid that died while writing
        except FileNotFoundError:
            pass
        fd = os.open(temporary, _OPEN_FLAGS, 0o600)
        try:
            os.fchmod(fd, 0o600)
            data = json.dumps(report, separators=(",", ":")).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temporary, final)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return False
    return True


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read_all(directory: str, skip: str = "") -> list[dict[str, Any]]:
    """Every report in `directory` (but daemon `skip`'s), each with its `path`: regular files of this user
    only, at most MAX_BYTES, whose JSON is an object naming its daemon."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(PREFIX) and n.endswith(SUFFIX))
    except OSError:
        return []
    reports = []
    for name in names:
        if name == f"{PREFIX}{skip}{SUFFIX}":
            continue
        report = _read(os.path.join(directory, name))
        if report is not None:
            reports.append(report)
    return reports


def _read(path: str) -> dict[str, Any] | None:
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > MAX_BYTES:
            return None
        raw = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        report = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(report, dict) or not isinstance(report.get("daemon"), str):
        return None
    if not isinstance(report.get("sessions"), dict):
        report["sessions"] = {}
    report["path"] = path
    return report


def unread_bytes(pid: int, inode: int) -> int | None:
    """Bytes waiting in the pipe with inode `inode` that is `pid`'s stdout (the agent's output its daemon never
    read: a pipe keeps them after its reader closed), or None when that cannot be seen (not that pipe, gone)."""
    try:
        fd = os.open(f"/proc/{pid}/fd/1", os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISFIFO(st.st_mode) or st.st_ino != inode:
            return None
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])
    except OSError:
        return None
    finally:
        os.close(fd)
