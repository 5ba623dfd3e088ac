"""The guardian's report and what a restarted daemon says of each session it lost (guardian_report.py, lost.py)."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import struct
import subprocess
import sys
import termios
from pathlib import Path

from loopwarden.runtime import guardian_report, lost
from loopwarden.runtime.guardian import Protected
from loopwarden.runtime.procfs import ProcId
from loopwarden.runtime.store import Batch, Store
from tests.support.waiting import wait_for

T = 1_700_000_000.0


def report(**sessions: dict) -> dict:
    return {"daemon": "10.20", "state": "done", "guardian": {"pid": 1, "start": 1}, "daemon_died_at": T,
            "term_at": T + 0.1, "kill_at": T + 5.1, "sessions": sessions}


def test_the_guardian_learns_each_things_session_and_the_agents_stdout_pipe() -> None:
    what = Protected()
    for line in ("+g 100 7 s3 4242", "+p 120 9 s3", "+g 200 8", "+m @10.20", "+g x 1 s9", "+p 1"):
        what.apply(line)
    assert what.groups == {ProcId(100, 7), ProcId(200, 8)} and what.procs == {ProcId(120, 9)}
    assert what.owners == {ProcId(100, 7): "s3", ProcId(120, 9): "s3"} and what.pipes == {"s3": 4242}
    what.apply("-g 100 7 s3 4242")
    what.apply("-p 120 9 s3")
    assert what.groups == {ProcId(200, 8)} and not what.owners and not what.pipes


def test_a_report_is_private_replaced_whole_and_read_back_only_if_it_is_ours(tmp_path: Path) -> None:
    assert guardian_report.write(str(tmp_path), "10.20", report(s1={"processes": 1}))
    path = Path(guardian_report.path_of(str(tmp_path), "10.20"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and [p.name for p in tmp_path.iterdir()] == [path.name]
    assert guardian_report.write(str(tmp_path), "10.20", report(s2={"processes": 0}))
    [read] = guardian_report.read_all(str(tmp_path))
    assert read["sessions"] == {"s2": {"processes": 0}} and read["path"] == str(path)
    assert guardian_report.read_all(str(tmp_path), skip="10.20") == []
    (tmp_path / "guardian-30.40.json").symlink_to(path)  # a link is never followed
    (tmp_path / "guardian-50.60.json").write_text("[1, 2]")  # nor is JSON that is not a report taken
    (tmp_path / "guardian-70.80.json").write_bytes(b"x" * (guardian_report.MAX_BYTES + 1))
    assert [r["daemon"] for r in guardian_report.read_all(str(tmp_path))] == ["10.20"]


def test_the_bytes_left_unread_in_an_agents_stdout_pipe_are_seen_only_in_that_pipe() -> None:
    r, w = os.pipe()
    agent = subprocess.Popen([sys.executable, "-c", "import os, time; os.write(1, b'x' * 5000); time.sleep(30)"],
                             stdout=w)
    os.close(w)
    try:
        inode = os.fstat(r).st_ino
        wait_for(lambda: struct.unpack("i", fcntl.ioctl(r, termios.FIONREAD, b"\0" * 4))[0] == 5000,
                 what="the agent's 5000 bytes in the pipe")
        os.close(r)  # the daemon is gone: the bytes stay in the pipe
        assert guardian_report.unread_bytes(agent.pid, inode) == 5000
        assert guardian_report.unread_bytes(agent.pid, inode + 1) is None  # another pipe: not said
        assert guardian_report.unread_bytes(2**22 + 1, inode) is None
    finally:
        agent.kill()
        agent.wait()


def test_the_words_of_each_ending() -> None:
    killed = lost.describe("s1", report(s1={"processes": 3, "pids": [5, 6, 7], "sigkill": 1, "survivors": 0,
                                            "unread_stdout": 4000}), 5, {"seq": 12, "ts": T - 2.5}, False)
    assert killed["how"] == "guardian" and killed["unjudged_window"] == 2.6
    text = lost.words(killed)
    assert text.startswith("killed by the guardian when the daemon died at ")
    assert "SIGTERM to 3 processes at" in text and ", SIGKILL to 1 at " in text and "; nothing survived; " in text
    assert "its last stored event: #12 at " in text and ", 2.6s before it was killed" in text
    assert text.endswith("; 4,000 bytes it wrote to stdout were never read")
    gone = lost.describe("s2", report(s2={"processes": 0, "unread_stdout": None}), 6, None, False)
    assert lost.words(gone).startswith("found gone by the guardian when the daemon died at ")
    assert lost.words(gone).endswith("(its process had exited); no event of it was stored")
    unseen = lost.describe("s3", None, os.getpid(), {"seq": 1, "ts": T}, False)
    assert (unseen["how"], unseen["pid_alive"]) == ("running", True) and "unjudged_window" not in unseen
    assert lost.words(unseen).startswith(f"still running? (not seen by the guardian; a process with its pid "
                                         f"{os.getpid()} exists); its last stored event: #1 at ")
    assert lost.describe("s4", None, None, None, False)["how"] == "gone"
    unfinished = lost.describe("s5", report(s5={"processes": 1}), 7, None, False)
    assert "the guardian did not finish (it died too)" in lost.words(unfinished)
    assert lost.describe("s6", None, 8, None, True)["how"] == "pending"
    in_pod = lost.in_pod({"pod": "lw-s7-1a2b3c", "node": "node1"}, {"seq": 4, "ts": T}, "its pod \x1b[2Jwas deleted")
    assert lost.words(in_pod).startswith("its daemon died while its agent ran in pod lw-s7-1a2b3c on node node1, "
                                         "and the next daemon could not take it up: its pod \\x1b[2Jwas deleted; "
                                         "its pod is deleted")  # what a cluster says is shown, never obeyed
    assert "could not take it up" not in lost.words(lost.in_pod({"pod": "lw-s8-1a2b3c"}, None))


def test_a_broken_or_forged_report_is_read_defensively_and_removed_once_settled(tmp_path: Path) -> None:
    with Store.open(tmp_path / "loopwarden.db") as store:
        store.write(Batch(sessions_upsert=[{"id": "s1", "state": "running", "created_at": T, "pid": 2**22 + 1}]))
        lost_ids = store.mark_lost(T + 1)
        broken = {"daemon": "1.1", "state": "done", "guardian": "x", "daemon_died_at": "soon",
                  "sessions": {"s1": {"processes": "many", "pids": 7, "unread_stdout": True, "survivors": None}}}
        (tmp_path / "guardian-1.1.json").write_text(json.dumps(broken))
        left = lost.settle(store, lost_ids, str(tmp_path))
        row = store.session("s1")
        assert row is not None and (left.sessions, row["lost"]["how"], row["lost"]["pids"]) == ([], "gone", [])
        assert row["lost"]["unread_stdout"] is None and row["termination_text"].startswith("found gone")
        assert not (tmp_path / "guardian-1.1.json").exists()
