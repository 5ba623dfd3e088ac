"""Finding the processes a test started, and telling when they are gone."""

from __future__ import annotations

import psutil


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def processes_with(marker: str) -> list[psutil.Process]:
    """Every process whose command line holds `marker`."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def process_with(marker: str) -> psutil.Process | None:
    """The first process whose command line holds `marker`, or None."""
    return next(iter(processes_with(marker)), None)
