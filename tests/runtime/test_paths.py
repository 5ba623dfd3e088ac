"""Private directories: created 0700, tightened if ours, refused if not ours or a symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from loopwarden.paths import SocketPathTooLong, UnsafeDirectory, default_paths, private_dir


def test_created_private_and_tightened(tmp_path: Path) -> None:
    made = private_dir(tmp_path / "a" / "b")
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o777)
    os.chmod(loose, 0o777)
    private_dir(loose)
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o700


def test_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafeDirectory, match="not a plain directory"):
        private_dir(tmp_path / "link")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to create a directory owned by someone else")
def test_someone_elses_directory_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 65534, 65534)
    with pytest.raises(UnsafeDirectory, match="belongs to uid 65534"):
        private_dir(other)


def test_loopwarden_home_holds_one_profile_and_a_socket_path_too_long_is_refused(tmp_path: Path) -> None:
    paths = default_paths({"LOOPWARDEN_HOME": str(tmp_path / ("x" * 120))})
    assert paths.database.parent == (tmp_path / ("x" * 120) / "data").resolve()
    with pytest.raises(SocketPathTooLong, match="set a shorter LOOPWARDEN_HOME") as refused:
        paths.socket  # noqa: B018 - never a shared directory such as /tmp instead
    assert "\n" not in str(refused.value)
    short = default_paths({"LOOPWARDEN_HOME": str(tmp_path / "lw")})
    assert short.socket == (tmp_path / "lw" / "run" / "daemon.sock").resolve()
