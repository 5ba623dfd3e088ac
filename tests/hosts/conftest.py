"""Fixtures for the several-machines tests: a local daemon (`lw`), a remote one (`remote`) and an sshd (`box`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwarden.runtime.hosts import SSH_ENV
from tests.hosts.sshd_harness import Box, start_box
from tests.support.daemon import Harness


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Harness]:
    """The daemon of the machine across ssh: its own LOOPWARDEN_HOME."""
    home = tmp_path / "remote"
    home.mkdir()
    with Harness(home) as harness:
        yield harness


@pytest.fixture
def box(tmp_path: Path, remote: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[Box]:
    """sshd on loopback serving `remote`'s profile; this process (and `lw.cli`) reach it as host `box`."""
    base = tmp_path / "ssh"
    base.mkdir()
    for found in start_box(base, remote):
        monkeypatch.setenv(SSH_ENV, found.ssh_command)
        yield found
