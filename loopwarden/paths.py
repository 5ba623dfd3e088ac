"""Where loopwarden keeps its socket, database, logs and spill files."""

from __future__ import annotations

import os
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP = "loopwarden"
HOME_ENV = "LOOPWARDEN_HOME"
_SOCKET_PATH_LIMIT = 100  # sun_path is 108 bytes on Linux; keep a margin


class UnsafeDirectory(OSError):
    """A directory loopwarden must own alone is a symlink, someone else's, or open to others."""


class SocketPathTooLong(OSError):
    """The runtime directory is too deep for a unix socket; the message says what to do."""


@dataclass(frozen=True)
class Paths:
    """The directories of one profile; LOOPWARDEN_HOME puts them all under one folder."""

    runtime: Path
    data: Path
    cache: Path
    config_dir: Path | None = None  # the daemon's own settings (alerts); None: the data directory
    state_dir: Path | None = None  # what a console keeps of the user's between runs; None: the data directory

    @property
    def config_file(self) -> Path:
        """The daemon's config file (`[notify]` ...): read at its start and by `loopwarden notify test`."""
        return (self.config_dir or self.data) / "config.toml"

    @property
    def socket(self) -> Path:
        """The control socket, in the private runtime directory; SocketPathTooLong when it cannot be there.

        A shorter path in a shared directory (/tmp) could be created first by another user, so
        there is none: the person is told to choose a shorter directory instead.
        """
        path = self.runtime / "daemon.sock"
        size = len(os.fsencode(path))
        if size > _SOCKET_PATH_LIMIT:
            raise SocketPathTooLong(
                f"the socket path {path} is {size} bytes, longer than a unix socket allows "
                f"({_SOCKET_PATH_LIMIT}); set a shorter {HOME_ENV} (or XDG_RUNTIME_DIR when {HOME_ENV} is unset)")
        return path

    @property
    def lock(self) -> Path:
        return self.runtime / "daemon.lock"

    @property
    def database(self) -> Path:
        return self.data / "loopwarden.db"

    @property
    def daemon_log(self) -> Path:
        return self.data / "daemon.log"

    @property
    def spill(self) -> Path:
        return self.cache / "spill"

    @property
    def console_view(self) -> Path:
        """The console's saved view (group, sort, filter, hide-ended), owner-only."""
        return (self.state_dir or self.data) / "console-view.json"


def working_directory() -> str:
    """The directory an agent launched from here starts in: this process's, which may have been removed (or
    made unreadable) under it; ValueError then says so in one line."""
    try:
        return os.getcwd()
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        raise ValueError(f"the current directory cannot be read ({reason}); "
                         "cd to a directory that exists and run again") from None


def default_paths(env: dict[str, str] | None = None) -> Paths:
    """The current profile: LOOPWARDEN_HOME if set, else the platform's per-user directories."""
    env = dict(os.environ) if env is None else env
    home = env.get(HOME_ENV)
    if home:
        base = Path(home).expanduser().resolve()
        return Paths(base / "run", base / "data", base / "cache", base, base / "state")
    with warnings.catch_warnings():  # no XDG_RUNTIME_DIR: platformdirs falls back to /tmp/runtime-UID, checked below
        warnings.simplefilter("ignore")
        runtime = Path(platformdirs.user_runtime_dir(APP))
    return Paths(runtime, Path(platformdirs.user_data_dir(APP)), Path(platformdirs.user_cache_dir(APP)),
                 Path(platformdirs.user_config_dir(APP)), Path(platformdirs.user_state_dir(APP)))


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) as 0700, or check an existing one is ours and private."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UnsafeDirectory(f"{path} is not a plain directory")
    if info.st_uid != os.getuid():
        raise UnsafeDirectory(f"{path} belongs to uid {info.st_uid}, not to you (uid {os.getuid()})")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path
