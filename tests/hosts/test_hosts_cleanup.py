"""The ssh forward ends with the CLI however it ends, and closing never waits for a host that hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from loopwarden.runtime.hosts import SSH_ENV
from loopwarden.widgets.hosts_feed import HostsFeed, RemoteFeed
from tests.hosts.sshd_harness import Box
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for


def forward_of(cli: subprocess.Popen[bytes]) -> tuple[psutil.Process, Path]:
    """The ssh carrying the CLI's forward, and the private directory of its socket, once the socket is up."""
    def found() -> tuple[psutil.Process, Path] | None:
        for proc in psutil.Process(cli.pid).children(recursive=True):
            try:
                argv = proc.cmdline()
                if argv[3:4] == ["loopwarden-forward"] and (Path(argv[4]) / "h" / "daemon.sock").exists():
                    [ssh] = proc.children()
                    return ssh, Path(argv[4])
            except (psutil.Error, ValueError):
                continue
        return None
    return wait_for(found, what="the forward up")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_forward_ends_with_the_cli_however_it_is_killed(lw: Harness, box: Box, sig: int) -> None:
    sid = box.remote.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="there")
    cli = subprocess.Popen([PY, "-m", "loopwarden", "--host", box.host, "logs", "-f", sid],
                           env={**lw.env, SSH_ENV: box.ssh_command}, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        ssh, private = forward_of(cli)
        cli.send_signal(sig)
        cli.wait(20)
        wait_for(lambda: not ssh.is_running() or ssh.status() == psutil.STATUS_ZOMBIE, what="ssh gone")
        wait_for(lambda: not private.exists(), what="its socket directory removed")
    finally:
        cli.kill()
        cli.wait()


def hanging_ssh(tmp_path: Path, answers_where: bool) -> str:
    """An ssh that never connects (or answers `where`, then never forwards)."""
    script = tmp_path / "ssh-hangs"
    where = ('case "$*" in *"where --json"*) echo \'{"socket": "/tmp/lw-test.sock", "daemon": true}\'; exit 0;; esac\n'
             if answers_where else "")
    script.write_text(f"#!/bin/sh\n{where}exec sleep 120\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("answers_where", [False, True], ids=["locating", "forwarding"])
def test_closing_the_console_does_not_wait_for_a_host_that_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 answers_where: bool) -> None:
    monkeypatch.setenv(SSH_ENV, hanging_ssh(tmp_path, answers_where))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    feed = HostsFeed.attach(None, ["box"])
    remote = feed.feeds["box"]
    assert isinstance(remote, RemoteFeed)
    tunnel = remote.tunnel
    feed.start()
    me = psutil.Process(os.getpid())

    def hanging() -> list[psutil.Process]:
        return [p for p in me.children(recursive=True) if "sleep" in p.name()]
    [sleeper] = wait_for(hanging, what="ssh hanging")
    if answers_where:
        wait_for(lambda: tunnel.process is not None, what="the forward started")
    started = time.monotonic()
    feed.close()
    took = time.monotonic() - started
    assert took < 30, f"close() took {took:.1f}s"  # ssh hangs for 120 s: close() did not wait for it
    wait_for(lambda: not sleeper.is_running() or sleeper.status() == psutil.STATUS_ZOMBIE, what="ssh ended")
    assert not list(tmp_path.glob("lw-*")), "the private directory was left"
