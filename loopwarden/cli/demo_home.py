"""Where the demo keeps its daemon, apart from the user's own profile; light enough for any command's error path
(`ls` with no daemon names the demo's when that one runs)."""

from __future__ import annotations

from pathlib import Path

import platformdirs

from ..paths import APP, HOME_ENV, Paths, default_paths
from ..runtime.client import Client, DaemonError


def demo_home() -> Path:
    """The demo's own profile: its socket, database and spill files, apart from the user's real ones."""
    return Path(platformdirs.user_data_dir(APP)) / "demo"


def demo_paths(home: Path | None = None) -> Paths:
    return default_paths({HOME_ENV: str(home or demo_home())})


def demo_daemon_hint(paths: Paths) -> str | None:
    """When no daemon answers at `paths` but the demo's does: where the sessions a user sees in the demo are."""
    demo = demo_paths()
    if paths.runtime == demo.runtime:
        return None
    try:
        Client.connect(demo, autostart=False).close()
    except (DaemonError, OSError):
        return None
    return f"the demo's daemon is running: 'loopwarden demo' shows it, or {HOME_ENV}={demo_home()} loopwarden ls"
