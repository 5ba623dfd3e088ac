"""Finding the processes a test started, and telling when they are gone."""

from __future__ import annotations

import psutil

from loopwarden.runtime.principal import KEEPER_MODULE


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def processes_with(marker: str) -> list[psutil.Process]:
    """Every process whose command line holds `marker`, but for a keeper (whose command line names the runtime
    directory it serves: it is no agent's)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            line = " ".join(proc.info["cmdline"] or [])
            if marker in line and KEEPER_MODULE not in line:
                found.append(proc)
        except psutil.Error:
            pass
    return found


def process_with(marker: str) -> psutil.Process | None:
    """The first process whose command line holds `marker`, or None."""
    return next(iter(processes_with(marker)), None)
