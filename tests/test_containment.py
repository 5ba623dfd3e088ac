"""Finding a session's processes (runtime/containment.py): what many sessions ending at once cost, a walk from
a session's seeds, and waiting for exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import anyio
import pytest

from loopwarden.runtime import containment, procfs
from loopwarden.runtime.procfs import ProcTable

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_sessions_ending_together_share_one_scan_of_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    scans = []
    real = ProcTable.scan

    def counted() -> ProcTable:
        scans.append(1)
        return real()

    monkeypatch.setattr(ProcTable, "scan", staticmethod(counted))
    monkeypatch.setattr(containment, "_last_scan", (0.0, ProcTable()))
    tables = []

    async def one() -> None:
        tables.append(await containment.fresh_table())

    async with anyio.create_task_group() as tg:
        for _ in range(50):
            tg.start_soon(one)
    assert len(scans) == 1 and len(tables) == 50 and all(t is tables[0] for t in tables)
    assert tables[0].children  # a real scan of this machine's /proc


def _spawn_tree() -> subprocess.Popen[bytes]:
    """A session leader whose child sleeps with a grandchild: three processes, the last two not its own."""
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', \"import subprocess, sys, time; "
            "subprocess.Popen(['sleep', '600']); time.sleep(600)\"]); time.sleep(600)")
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"])


def _wait_tree(root: int, size: int) -> ProcTable:
    deadline = time.monotonic() + 30
    while True:
        table = ProcTable.around({root})
        if len(table.procs) >= size or time.monotonic() > deadline:
            return table
        time.sleep(0.05)


async def test_a_walk_from_the_root_finds_the_whole_tree_and_nothing_else() -> None:
    proc = _spawn_tree()
    try:
        table = _wait_tree(proc.pid, 3)
        assert len(table.procs) == 3 and proc.pid in table.procs
        assert table.descendants({proc.pid}) == set(table.procs)
        assert all(info.pgid == proc.pid for info in table.procs.values())  # all of the session's group
        assert os.getpid() not in table.procs  # its parent is not below it
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


async def test_ending_a_walked_session_kills_its_grandchildren_and_waits_for_their_exits() -> None:
    proc = _spawn_tree()
    try:
        _wait_tree(proc.pid, 3)
        session = containment.Containment("t1", mark="t1@test")
        session.walk = True
        session.started(proc.pid)
        members = session.members(await session.table())
        assert len(members) == 3
        left = await session.end(grace=5.0)
        assert left == set() and session.emptied
        assert all(not procfs.alive(p) for p in members)
        assert await session.end(grace=5.0) == set()  # nothing of it left to look for
        session.release()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


async def test_waiting_for_exits_returns_when_they_exit_and_not_before() -> None:
    proc = _sleeper()
    try:
        me = procfs.proc_id(proc.pid)
        assert me is not None
        with anyio.move_on_after(0.2) as waited:  # still running: the wait lasts its whole bound
            await containment.wait_gone({me}, 10.0)
        assert waited.cancelled_caught
        proc.kill()
        with anyio.fail_after(10):  # an exit ends the wait (well before its 600 s bound)
            await containment.wait_gone({me}, 600.0)
    finally:
        proc.kill()
        proc.wait()
