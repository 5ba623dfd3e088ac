"""Finding a session's processes (runtime/containment.py): what many sessions ending at once cost, a walk from
a session's seeds, and waiting for exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest

from loopwarden.runtime import containment, procfs
from loopwarden.runtime.cgroups import CgroupTree, SessionCgroup
from loopwarden.runtime.procfs import ProcTable
from tests.support.waiting import wait_for

pytestmark = pytest.mark.anyio


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


@contextmanager
def _two_sleepers() -> Iterator[tuple[subprocess.Popen[bytes], procfs.ProcId, procfs.ProcId]]:
    """Two sleeping children: the first's process and both identities; both killed and reaped after."""
    first, second = _sleeper(), _sleeper()
    try:
        a, b = procfs.proc_id(first.pid), procfs.proc_id(second.pid)
        assert a is not None and b is not None
        yield first, a, b
    finally:
        for proc in (first, second):
            proc.kill()
            proc.wait()


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


def test_a_group_that_reuses_the_gone_agents_pid_is_not_the_sessions() -> None:
    """The agent's pid now names another process (a group leader with a child, started after the agent): its
    group is another session's, never taken as ours (before, every member born after the agent was)."""
    other = _spawn_tree()
    try:
        table = _wait_tree(other.pid, 3)
        leader = procfs.proc_id(other.pid)
        assert leader is not None and len(table.group(other.pid)) == 3
        session = containment.Containment("t1", mark="t1@test", daemon_pid=other.pid)
        session.root = procfs.ProcId(other.pid, leader.start - 1)  # our agent: the same pid, started earlier
        assert session.members(ProcTable.scan()) == set() and session.group_gone
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()


def test_a_group_seen_empty_once_is_never_the_sessions_again() -> None:
    """A group outlives its leader while members remain (still ours); once empty, its id can be reused."""
    pgid, child = 5_000_001, 5_000_002  # above the kernel's highest pid_max (2**22): no process has them
    reused = ProcTable(procs={child: procfs.ProcInfo(child, 1, pgid, pgid, 200, False)}, groups={pgid: [child]})
    session = containment.Containment("t1", mark="t1@test", daemon_pid=pgid)
    session.root = procfs.ProcId(pgid, 100)
    assert session.members(reused) == {procfs.ProcId(child, 200)}  # the agent exited, its child is still ours
    assert session.members(ProcTable()) == set() and session.group_gone  # then the group emptied
    assert session.members(reused) == set()  # the same id again: another session's group


@pytest.mark.parametrize("pidfds", [256, 0])
async def test_ending_a_walked_session_kills_its_grandchildren_and_waits_for_their_exits(
        pidfds: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also with no pidfd to spare (0: the daemon's ends hold `Pidfds.most` together): each process is then
    signalled by its identity and polled for, with the same outcome."""
    monkeypatch.setattr(containment.Pidfds, "most", pidfds)
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
        assert containment.Pidfds.held == 0
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


_ESCAPER = """\
import os, sys, time
if os.fork() == 0:
    os.setsid()  # out of the agent's group, and then out of its tree: a double fork
    if os.fork() == 0:
        print(os.getpid(), flush=True)
        time.sleep(600)
    os._exit(0)
os.wait()
time.sleep(600)
"""

_ENDING_TOGETHER = """\
import json, os, subprocess, sys, time
import anyio
from loopwarden.runtime import containment, procfs
from loopwarden.runtime.cgroups import CgroupTree, SessionCgroup
from loopwarden.runtime.reaper import become_subreaper

ESCAPER, N = sys.argv[1], int(sys.argv[2])
assert become_subreaper()  # as the daemon is: the double-forked grandchildren come back to this process
sweep = containment.Sweep(os.getpid())

def start(mark):
    env = {**os.environ, procfs.MARK_ENV: mark}
    proc = subprocess.Popen([sys.executable, "-c", ESCAPER], env=env, stdout=subprocess.PIPE,
                            start_new_session=True)
    grandchild = int(proc.stdout.readline())
    deadline = time.monotonic() + 30
    while (procfs.read_stat(grandchild) or procfs.ProcInfo(0, 0, 0, 0, 0, False)).ppid != os.getpid():
        assert time.monotonic() < deadline, "the grandchild never came back"
        time.sleep(0.01)
    return proc, procfs.proc_id(grandchild)

sessions = []
for i in range(N):
    c = containment.Containment(f"t{i}", mark=f"t{i}@test", daemon_pid=os.getpid())
    c.walk, c.sweep = True, sweep
    proc, grandchild = start(c.mark)
    c.started(proc.pid)
    sessions.append((c, proc, grandchild))
stranger, stranger_grandchild = start("other@test")  # an orphan of no session ending here

left = []
async def main():
    async def end(c):
        left.extend(await c.end(grace=5.0))
    async with anyio.create_task_group() as tg:
        for c, _, _ in sessions:
            tg.start_soon(end, c)
anyio.run(main)
result = {"left": len(left), "looks": sweep.looks, "asked": sweep.asked,
          "alive": sum(procfs.alive(g) or procfs.proc_id(p.pid) is not None for _, p, g in sessions),
          "stranger": procfs.alive(stranger_grandchild) and procfs.proc_id(stranger.pid) is not None}
for proc, grandchild in [(p, g) for _, p, g in sessions] + [(stranger, stranger_grandchild)]:
    procfs.signal_exact(grandchild, 9)  # a survivor fails the test, and is not left behind
    procfs.signal_group(proc.pid, 9)
    proc.wait()
    os.waitpid(grandchild.pid, 0)
print(json.dumps(result))
"""


def test_sessions_ending_together_share_looks_and_each_loses_its_double_forked_grandchild() -> None:
    """Twelve sessions end at once in a child subreaper (as the daemon is), each agent with a grandchild
    that left its group (setsid) and its tree (a double fork), found only by its mark: every process of
    every session is gone, the sessions shared looks at the daemon's children, and an orphan of no session
    ending here is left alone (the near miss)."""
    n = 12
    done = subprocess.run([sys.executable, "-c", _ENDING_TOGETHER, _ESCAPER, str(n)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["left"] == 0 and result["alive"] == 0
    assert result["stranger"] is True
    assert result["asked"] >= 2 * n  # each looked before its SIGTERM and again after its processes went
    assert result["looks"] <= result["asked"] - (n - 1)  # ... and the first looks of all twelve were one


_EXITED = """\
import os, subprocess, time
from loopwarden.runtime.reaper import children_exited
before = children_exited()
proc = subprocess.Popen(["sleep", "600"])
running = children_exited()
proc.kill()
deadline = time.monotonic() + 30
while not children_exited() and time.monotonic() < deadline:
    time.sleep(0.01)
exited = children_exited()
still = children_exited()  # asking reaps nothing
proc.wait()
print(before, running, exited, still, children_exited())
"""


def test_the_reaper_asks_whether_a_child_exited_without_reaping_it() -> None:
    """A round of the reaper reads the children list only when some child has exited (a near miss: one
    running); asking does not reap it, so its own waiter still gets its exit code."""
    done = subprocess.run([sys.executable, "-c", _EXITED], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True", "True", "False"]


async def test_an_end_holds_one_pidfd_per_process_still_there() -> None:
    """The pidfds of an end are opened once per process and closed as the processes go (retain), so a
    session that forks all through its grace holds no more descriptors than it has processes."""
    with _two_sleepers() as (first, a, b), containment.Pidfds() as fds:
        fa, fb = fds.get(a), fds.get(b)
        assert fa is not None and fb is not None and fds.get(a) == fa  # one each, opened once
        fds.signal(a, signal.SIGKILL)
        first.wait()
        assert fds.get(a) == fa  # a pidfd names that process for good, gone or not
        fds.retain({b})
        assert list(fds.fds) == [b]
        with pytest.raises(OSError):
            os.fstat(fa)  # closed
        assert os.fstat(fb) is not None  # the other is kept


async def test_the_pidfds_of_exited_processes_are_closed_before_the_next_look() -> None:
    with _two_sleepers() as (first, a, b):
        with containment.Pidfds() as fds:
            fa, fb = fds.get(a), fds.get(b)
            assert fa is not None and fb is not None and containment.Pidfds.held == 2
            first.kill()
            first.wait()
            fds.drop_exited()
            assert list(fds.fds) == [b] and containment.Pidfds.held == 1
            fds.drop_exited()  # the one still running keeps its pidfd
            assert list(fds.fds) == [b]
        assert containment.Pidfds.held == 0


def test_the_daemon_raises_its_soft_limit_of_open_files_and_sizes_the_pidfds_to_it() -> None:
    code = ("import resource; from loopwarden.runtime import containment as c; "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (200, 4096)); "
            "print(c.more_descriptors(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], c.Pidfds.most)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["4096", "4096", "256"]
    low = code.replace("(200, 4096)", "(200, 200)")
    out = subprocess.run([sys.executable, "-c", low], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["200", "200", "25"]  # the hard limit is the ceiling: 200 // 8


async def test_sessions_asking_before_a_look_begins_share_it_and_one_asking_after_gets_its_own() -> None:
    """`kill` requests end sessions one after another, each in a pass of the loop of its own: those that ask
    before the look begins (within its gathering window) share it; one that asks after it began gets a
    look of its own (the near miss), as fresh as its request."""
    sweep = containment.Sweep(os.getpid(), gather=3600.0)  # the test begins each look itself
    sessions = [containment.Containment(f"g{i}", daemon_pid=os.getpid()) for i in range(4)]
    tables: dict[str, ProcTable] = {}

    async def ask(c: containment.Containment) -> None:
        tables[c.sid] = await sweep.table(c)

    async with anyio.create_task_group() as tg:
        for c in sessions[:3]:
            tg.start_soon(ask, c)
            await anyio.wait_all_tasks_blocked()  # it asked and waits: the next one asks in a later pass
        first = sweep._next
        assert first is not None and len(first.sessions) == 3 and not tables
        sweep._begin(first)
        tg.start_soon(ask, sessions[3])
        await anyio.wait_all_tasks_blocked()
        second = sweep._next
        assert second is not None and second is not first and list(second.sessions.values()) == [sessions[3]]
        sweep._begin(second)
    assert sweep.asked == 4 and sweep.looks == 2
    assert tables["g0"] is tables["g1"] is tables["g2"] is not tables["g3"]


def test_a_sessions_cgroup_lists_the_processes_in_the_cgroups_below_it_too() -> None:
    tree, why = CgroupTree.create()
    if tree is None:
        pytest.skip(f"no usable cgroup v2 here: {why}")
    session = tree.session("t1")
    assert session is not None
    procs = []
    try:
        procs.append(subprocess.Popen(session.wrap(["sleep", "600"])))
        below = session.path / "below"
        below.mkdir()  # as an agent with the right to may: a cgroup of its own inside the session's
        procs.append(subprocess.Popen(SessionCgroup(below).wrap(["sleep", "600"])))
        wanted = {p.pid for p in procs}
        # each joins its cgroup as it starts
        wait_for(lambda: session.pids() == wanted, 30, lambda: f"{wanted}, not {session.pids()}", every=0.01)
        gone = procs.pop()
        gone.kill()  # the near miss: the cgroup below, empty, adds nothing
        gone.wait()
        wait_for(lambda: session.pids() == {procs[0].pid}, 30, "the session's one process left", every=0.01)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        session.kill()
        tree.close()


def test_a_table_scanned_before_the_agent_started_does_not_mark_its_group_gone() -> None:
    """The sampler scans /proc, then observes its sessions one slice at a time; an agent that starts in
    between is not in that table, and must not be taken for gone (its group would never be signalled)."""
    before = ProcTable.scan()
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    session = containment.Containment("t1", mark="t1@test")
    try:
        session.started(agent.pid)
        session.observe(before)
        assert not session.group_gone
        assert agent.pid in {p.pid for p in session.members(ProcTable.scan())}
    finally:
        session.release()
        agent.kill()
        agent.wait()
