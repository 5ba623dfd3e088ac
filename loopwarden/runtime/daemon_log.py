"""The daemon's log: one line each on its stderr, agent text made visible, a failed write counted."""

from __future__ import annotations

import os
import time

from ..supervisor.visible import visible


class DaemonLog:
    """Writes the daemon's log lines; `errors` counts those a full disk (or a closed stderr) refused."""

    def __init__(self) -> None:
        self.errors = 0

    def __call__(self, text: str) -> None:
        """One line, agent text in it made visible (it cannot forge lines or drive a terminal); a failed write
        is counted, never raised."""
        try:
            os.write(2, f"{time.strftime('%Y-%m-%d %H:%M:%S')} {visible(text)}\n".encode("utf-8", "replace"))
        except OSError:
            self.errors += 1
