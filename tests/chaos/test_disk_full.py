"""A full disk degrades, never kills: the daemon, its sessions and the engine go on; what could not be
written is counted and shown; operator actions that need the audit are refused, those that stop an
agent still work; the daemon starts on a full disk and recovers when space returns.

Each test runs a real daemon whose LOOPWARDEN_HOME (store, spill files, the daemon's own log) is a
2 MiB tmpfs mounted for it, filled to the last byte by the test.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.console.helpers import RecordingConsole, until
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

VOLUME = "2m"


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of its own (skipped where it cannot be mounted: not root, or no mount at all)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a 2 MiB tmpfs needs root on Linux")
    path = tmp_path / "vol"
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={VOLUME},mode=0700", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(volume: Path) -> Path:
    """Take every free byte of the volume with one file; delete it to give the space back."""
    filler = volume / "filler"
    try:
        with open(filler, "wb") as f:
            block = b"\0" * (64 << 10)
            while True:
                f.write(block)
                f.flush()
    except OSError as exc:  # (a busy session may have filled the volume first: then so much the better)
        assert exc.errno == errno.ENOSPC, exc
    try:  # the last partial block, byte by byte
        with open(filler, "ab", buffering=0) as f:
            while f.write(b"\0"):
                pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    return filler


def store_health(lw: Harness) -> dict:
    return lw.request("ping")["store"]


def test_a_full_disk_leaves_the_daemon_and_its_agents_running_and_says_what_was_lost(volume: Path) -> None:
    lw = Harness(volume)
    lw.start()
    try:
        trigger = volume.parent / "go"
        looper = lw.run_detached(PY, str(AGENTS / "repeat_after.py"), str(trigger), name="looper")
        steady = lw.run_detached(PY, str(AGENTS / "paced_flood.py"), "--rate", "200", name="steady")
        lw.wait_state(looper, "running")
        filler = fill(volume)
        trigger.touch()

        # the engine still judges: the looping agent is terminated by its rule, with nothing stored
        snap = lw.wait_state(looper, "terminated", timeout=60)
        assert snap["termination"] == "repetition_loop"
        assert snap["spill_failures"] == 1  # its 300,000-character output could not be spilled: truncated
        health = wait_for(lambda: (h := store_health(lw))["write_errors"] and h["unwritten"].get("events") and h,
                          what="the lost rows to be counted")
        assert health["last_error"] and "full" in health["last_error"]
        assert lw.status(steady)["state"] == "running" and lw.request("ping")["pid"] == lw.daemon.pid  # type: ignore[union-attr]
        shown = lw.cli("status")
        assert shown.returncode == 0 and "not written since the daemon started" in shown.stdout

        # what lets an agent go on needs its audit row: refused, and nothing was done
        refused = lw.cli("inject", "steady", "carry on")
        assert refused.returncode == 3 and "audit log could not be written" in refused.stderr
        assert "nothing was done" in refused.stderr
        # stopping an agent is never refused: done, with a warning
        stopped = lw.cli("kill", "steady")
        assert stopped.returncode == 0 and "audit log could not be written" in stopped.stderr
        lw.wait_state(steady, "terminated")

        # space returns: new records are stored again, and operator actions work
        filler.unlink(missing_ok=True)
        again = lw.run_detached(PY, "-m", "loopwarden.sessions.scripted", "healthy", name="after")
        lw.wait_state(again, "exited", timeout=60)
        assert any(e["kind"] == "done" for e in lw.events(again))
        assert lw.status(looper)["termination"] == "repetition_loop"  # its final state was written when space came
    finally:
        lw.stop()
    assert lw.daemon is not None and lw.daemon.returncode == 0


def test_the_daemon_starts_on_a_full_disk_and_opens_its_store_when_space_returns(volume: Path) -> None:
    lw = Harness(volume)
    lw.start()
    first = lw.run_detached(PY, "-m", "loopwarden.sessions.scripted", "healthy", name="before")
    lw.wait_state(first, "exited", timeout=60)
    lw.stop()
    filler = fill(volume)
    lw.start()  # the socket needs no space; the store cannot be opened
    try:
        health = store_health(lw)
        assert health["open"] is False and "cannot open the store" in str(health["last_error"])
        assert "NOT OPEN" in lw.cli("status").stdout
        refused = lw.cli("run", "--", PY, "-c", "print(1)")
        assert refused.returncode == 3 and "audit log could not be written" in refused.stderr
        filler.unlink(missing_ok=True)
        wait_for(lambda: store_health(lw)["open"], timeout=30, what="the store to open again")
        later = lw.run_detached(PY, "-m", "loopwarden.sessions.scripted", "healthy", name="after")
        assert int(later[1:]) > int(first[1:])  # ids go on from the history, never reused
        lw.wait_state(later, "exited", timeout=60)
        assert any(e["kind"] == "done" for e in lw.events(later))
        assert lw.status(first)["state"] == "exited"  # the history from before is still there
    finally:
        lw.stop()


def test_after_a_sigkill_the_daemon_starts_on_a_full_disk_and_marks_the_lost_session(volume: Path) -> None:
    lw = Harness(volume).not_keeping()  # the guardian's path: a kept agent would outlive its daemon
    lw.start()
    sid = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="orphaned")
    lw.wait_state(sid, "running")

    def stored_state() -> str | None:
        with sqlite3.connect(f"file:{lw.paths.database}?mode=ro", uri=True) as db:
            row = db.execute("SELECT state FROM sessions WHERE id = ?", [sid]).fetchone()
        return row[0] if row else None

    wait_for(lambda: stored_state() == "running", what="its 'running' snapshot in the store")
    assert lw.daemon is not None
    lw.daemon.kill()  # its session stays 'running' in the store: the next daemon must mark it lost
    lw.daemon.wait(10)
    filler = fill(volume)
    lw.start()  # whether the store opens (its write-ahead log may still have room) or not, the daemon runs
    try:
        assert lw.request("ping")["pid"] == lw.daemon.pid
        filler.unlink(missing_ok=True)
        wait_for(lambda: lw.request("ping")["store"]["open"], timeout=30, what="the store to open again")
        assert lw.status(sid)["state"] == "lost"
    finally:
        lw.stop()


def test_a_daemon_whose_own_log_cannot_be_written_runs_and_counts_it(tmp_path: Path) -> None:
    """/dev/full fails every write with ENOSPC: the daemon's log lines are lost, counted, never fatal."""
    lw = Harness(tmp_path)
    with open("/dev/full", "wb") as full:
        lw.daemon = subprocess.Popen([PY, "-m", "loopwarden", "serve"], env=lw.env, stdout=full, stderr=full,
                                     start_new_session=True)
    wait_for(lw._connectable, what="the daemon's socket")
    try:
        assert lw.request("ping")["log_errors"] >= 1  # its first line, "listening on ...", was lost
        sid = lw.run_detached(PY, "-m", "loopwarden.sessions.scripted", "healthy", name="healthy")
        assert lw.wait_state(sid, "exited", timeout=60)["exit_code"] == 0
    finally:
        lw.stop()
    assert lw.daemon.returncode == 0


@pytest.mark.anyio
async def test_the_consoles_status_line_says_when_records_are_not_stored(volume: Path) -> None:
    lw = Harness(volume)
    lw.start()
    try:
        sid = lw.run_detached(PY, str(AGENTS / "paced_flood.py"), "--rate", "200", name="steady")
        lw.wait_state(sid, "running")
        app = RecordingConsole(lw.paths, autostart=False)
        async with app.run_test(size=(160, 40)) as pilot:
            status = app.main.query_one("#status", Static)
            await until(pilot, lambda: app.feed.ready and " live" in str(status.render()), what="the status line")
            assert "not stored" not in str(status.render())
            filler = fill(volume)
            await until(pilot, lambda: "records not stored" in str(status.render()), timeout=30,
                        what="the status line to say records are lost")
            filler.unlink(missing_ok=True)
        lw.request("kill", session=sid)
    finally:
        lw.stop()
