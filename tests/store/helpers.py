"""What the tests of the daemon's files share."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def mode(path: str | Path) -> int:
    """A file's permission bits (a symlink's own, not its target's)."""
    return stat.S_IMODE(os.lstat(path).st_mode)
