"""The pure pieces of runtime/principal.py: /proc parsing and telling a person's shell from a hook's."""

from __future__ import annotations

import os

import pytest

from loopwarden.runtime.hook_claims import runs_command as _runs_command
from loopwarden.runtime.principal import Claim, claimed_by, descends_from, tty_name
from loopwarden.runtime.procfs import ProcId, ProcInfo, ancestry, read_stat


@pytest.mark.parametrize(("argv", "runs"), [
    (["/bin/sh", "-c", "loopwarden hook claude-code"], True),  # how Claude Code runs a hook
    (["bash", "-lc", "make"], True),
    (["bash", "hooks/lw.sh"], True),  # a wrapper script
    (["bash", "-o", "vi", "-c", "x"], True),
    (["bash"], False),  # a shell reading what a person types
    (["-bash"], False),  # a login shell
    (["zsh", "-l"], False),
    (["bash", "-i"], False),
    (["bash", "--rcfile", "my.rc"], False),
    (["bash", "-s"], False),
    ([], False),
])
def test_a_shell_running_a_command_is_told_from_a_persons_shell(argv: list[str], runs: bool) -> None:
    assert _runs_command(argv) is runs


def test_tty_names() -> None:
    assert tty_name(0) is None
    assert tty_name((136 << 8) | 3) == "pts/3"
    assert tty_name((4 << 8) | 1) == "tty1"
    assert tty_name((4 << 8) | 65) == "ttyS1"


def test_this_process_is_read_from_proc_and_its_chain_reaches_init() -> None:
    stat = read_stat(os.getpid())
    assert stat and (stat.pid, stat.ppid, stat.pgid, stat.sid) == (os.getpid(), os.getppid(), os.getpgrp(),
                                                                    os.getsid(0))
    chain = ancestry(os.getpid())
    assert chain[0] == stat and chain[-1].ppid == 0
    assert read_stat(2 ** 22 + 1) is None  # above pid_max: never a process


def stat(pid: int, ppid: int, pgrp: int | None = None, sid: int | None = None, start: int = 1) -> ProcInfo:
    return ProcInfo(pid, ppid, pgrp or pid, sid or pid, start, False, comm="x")


def test_claims_see_the_group_the_session_and_descent_and_not_a_reused_pid() -> None:
    locate = claimed_by([Claim("s1", ProcId(100, 1), "the agent", group=True),
                         Claim("s2", ProcId(200, start=7), "the adopted process")])
    assert locate([stat(150, 1, pgrp=100, sid=100)]).how == "its process group"  # type: ignore[union-attr]
    assert locate([stat(151, 1, sid=100)]).how == "its session"  # type: ignore[union-attr]
    inside = locate([stat(152, 151), stat(151, 100, sid=100), stat(100, 1)])
    assert inside and inside.session == "s1" and inside.how == "it descends from pid 151, in the agent's session"
    assert locate([stat(201, 200), stat(200, 1, start=7)]).how == (  # type: ignore[union-attr]
        "it descends from the adopted process, pid 200")
    assert locate([stat(201, 200), stat(200, 1, start=8)]) is None  # pid 200 is another process now


def test_the_daemons_descendants_are_agents_but_its_guardian_is_not() -> None:
    locate = descends_from(10, exempt={11})
    orphan = locate([stat(30, 10), stat(10, 1)])
    assert orphan and orphan.session is None and "pid 10" in orphan.how
    assert locate([stat(11, 10), stat(10, 1)]) is None
    assert locate([stat(9, 1)]) is None
