"""Memory is bounded by bytes, whatever agents and clients do: a deaf agent is stopped, a reader that
never reads is skipped (and in the end cut off), history is read a bounded page at a time, a flood of
blank lines costs linear time. Each bound is measured on the real daemon's RSS."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import orjson
import psutil

from loopwarden.runtime.subscribers import QUEUE_BYTES
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

MiB = 1 << 20


class PeakRss(threading.Thread):
    """The highest RSS of a process, sampled every 20 ms until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.start_rss = self.peak = self.proc.memory_info().rss
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.02):
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return

    def __enter__(self) -> PeakRss:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.join(5)

    @property
    def growth(self) -> int:
        return self.peak - self.start_rss


def test_an_agent_that_never_reads_its_input_is_stopped_with_a_reason_and_memory_stays_flat(lw: Harness) -> None:
    assert lw.daemon is not None
    with PeakRss(lw.daemon.pid) as rss:
        sid = lw.run_detached(PY, str(AGENTS / "deaf_handshake.py"), name="deaf")
        snap = lw.wait_state(sid, "terminated", timeout=60)
    assert snap["termination"] == "validation_failure"
    assert "stopped reading its input" in snap["termination_text"]
    assert rss.growth < 48 * MiB, f"the daemon grew {rss.growth / MiB:.0f} MiB"


def test_a_subscriber_that_never_reads_is_skipped_within_its_byte_bound(lw: Harness) -> None:
    assert lw.daemon is not None
    sid = lw.run_detached(PY, str(AGENTS / "big_outputs.py"), "0", "15000", "--forever", "--rate", "600",
                          name="big")
    lw.wait_state(sid, "running")
    deaf = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    deaf.connect(str(lw.paths.socket))
    deaf.sendall(orjson.dumps({"id": 1, "op": "subscribe", "sessions": [sid], "events": True}) + b"\n")
    try:
        with PeakRss(lw.daemon.pid) as rss:
            deadline = time.monotonic() + 10
            queued = []
            while time.monotonic() < deadline:  # ten seconds of a 9 MB/s stream it never reads
                queued.append(lw.request("ping")["queued_for_subscribers"])
                time.sleep(0.2)  # a sampling interval, not a wait for a condition
        assert max(queued) <= QUEUE_BYTES
        assert max(queued) > QUEUE_BYTES // 2  # it really was full: what did not fit was skipped
        assert rss.growth < 64 * MiB, f"the daemon grew {rss.growth / MiB:.0f} MiB"
        assert lw.status(sid)["state"] == "running"  # the session never waited for the reader
    finally:
        deaf.close()
        lw.request("kill", session=sid)


def test_history_is_read_a_bounded_page_at_a_time_even_five_readers_at_once(lw: Harness) -> None:
    assert lw.daemon is not None
    sid = lw.run_detached(PY, str(AGENTS / "big_outputs.py"), "300", "60000", name="big")
    lw.wait_state(sid, "exited", timeout=120)
    lw.request("logs", session=sid, limit=1)  # writes what is still queued
    with sqlite3.connect(f"file:{lw.paths.database}?mode=ro", uri=True) as db:
        stored = db.execute("SELECT count(*) FROM events WHERE session_id = ?", [sid]).fetchone()[0]
    with PeakRss(lw.daemon.pid) as rss:
        readers = [subprocess.Popen([PY, "-m", "loopwarden", "logs", "--json", "--limit", "10000", sid], env=lw.env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(5)]
        outputs = [reader.communicate(timeout=120) for reader in readers]
    for reader, (out, err) in zip(readers, outputs, strict=True):
        assert reader.returncode == 0, err
        records = [orjson.loads(line) for line in out.splitlines()]
        assert sum(r["kind"] == "event" for r in records) == stored == 602  # hello, 300 calls and results, done
    assert rss.growth < 96 * MiB, f"the daemon grew {rss.growth / MiB:.0f} MiB for 5 x 18 MB of history"


def test_a_flood_of_blank_lines_costs_linear_time_and_never_stalls_other_clients(lw: Harness) -> None:
    flood = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    flood.connect(str(lw.paths.socket))
    worst = 0.0
    stop = threading.Event()

    def ping() -> None:
        nonlocal worst
        with lw.client() as client:
            while not stop.is_set():
                start = time.monotonic()
                client.request("ping")
                worst = max(worst, time.monotonic() - start)

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    start = time.monotonic()
    chunk = b"\n" * MiB
    for _ in range(32):
        flood.sendall(chunk)
    flood.sendall(b'  \n\n {"id": 7, "op": "ping"}\n')
    reply = orjson.loads(flood.makefile("rb").readline())
    took = time.monotonic() - start
    stop.set()
    pinger.join(10)
    flood.close()
    assert reply["ok"] and reply["id"] == 7
    assert took < 20, f"32 MiB of blank lines took {took:.1f} s"  # quadratic splitting took 47 s here
    assert worst < 2.0, f"another client waited {worst:.2f} s"


def test_ended_sessions_leave_the_daemons_memory_and_stay_in_its_history(lw: Harness) -> None:
    # started by `run` requests on the socket, not 40 CLI processes one after another (most of the time)
    sids = [lw.launch("true", adapter="plain", name=f"short{i}") for i in range(40)]
    for sid in sids:
        lw.wait_state(sid, "exited")
    wait_for(lambda: lw.request("ping")["sessions"] == 0, what="the ended sessions to leave memory")
    listed = {s["id"] for s in lw.request("list")}
    assert set(sids) <= listed
    assert lw.status("short3")["state"] == "exited"


def test_a_long_history_is_not_loaded_at_start_and_is_still_listed_whole(lw: Harness) -> None:
    from loopwarden.runtime.store import Batch, Store

    template = lw.wait_state(lw.run_detached("true", adapter="plain", name="template"), "exited")
    lw.stop()
    now = time.time() - 6000  # within store.retention, or the daemon's pruner deletes them at start
    with Store.open(lw.paths.database) as store:  # 5,000 ended sessions, shaped like the real one
        for start in range(0, 5000, 1000):
            rows = []
            for i in range(start, start + 1000):
                sid = f"s{i + 2}"
                snap = {**template, "id": sid, "name": f"old{i}", "created_at": now + i, "ended_at": now + i + 1}
                rows.append({"id": sid, "name": snap["name"], "adapter": "plain", "state": "exited",
                             "created_at": snap["created_at"], "ended_at": snap["ended_at"], "snapshot": snap})
            store.write(Batch(sessions_upsert=rows))
    lw.start()
    listed = lw.request("list")
    assert len(listed) < 5000  # the newest, bounded by bytes: the rest stay in the store
    assert listed[0]["counters"] == template["counters"]  # whole snapshots, as they were stored
    assert lw.request("list", stored=True)[0]["counters"] == template["counters"]
    assert lw.status("old7")["id"] == "s9"  # an old one is found by name through the store
    shown = lw.cli("ls", "--all")
    assert shown.returncode == 0 and len(shown.stdout.splitlines()) == 1 + 5001  # the header and every session
    assert lw.run_detached("true", adapter="plain") == "s5002"  # ids go on from the history


def test_an_attached_run_that_is_cut_off_says_why_and_does_not_call_its_session_lost(tmp_path: Path) -> None:
    """A daemon on a real socket that answers `run` and `subscribe`, then cuts the subscriber off, as the
    real one does after CUTOFF_SECONDS of a reader that takes nothing (too slow to wait for in a test)."""
    from loopwarden.paths import default_paths

    env = {**os.environ, "LOOPWARDEN_HOME": str(tmp_path)}
    path = default_paths(env).socket
    path.parent.mkdir(parents=True, mode=0o700)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()

    cursors = {"after": 0, "verdicts_after": 0, "actions_after": 0}
    empty_logs = {"session": "s1", "start": cursors, "end": cursors, "next": cursors, "more": False,
                  "events": [], "verdicts": [], "actions": []}

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()  # `run` reads its backlog aside

    def answer(conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn, conn.makefile("rwb") as f:
            for line in f:
                req = orjson.loads(line)
                if req["op"] == "logs":
                    f.write(orjson.dumps({"id": req["id"], "ok": True, "result": empty_logs}) + b"\n")
                elif req["op"] == "run":
                    f.write(orjson.dumps({"id": req["id"], "ok": True,
                                          "result": {"id": "s1", "name": "x"}}) + b"\n")
                elif req["op"] == "subscribe":
                    f.write(orjson.dumps({"id": req["id"], "ok": True, "result": {"sessions": [
                        {"id": "s1", "state": "running"}]}}) + b"\n")
                    f.write(b'{"kind":"skipped","count":1200}\n')
                    f.write(b'{"kind":"cut","reason":"cut off: took no message for 31 s"}\n')
                else:
                    f.write(orjson.dumps({"id": req["id"], "ok": True, "result": {}}) + b"\n")
                f.flush()

    threading.Thread(target=serve, daemon=True).start()
    try:
        done = subprocess.run([PY, "-m", "loopwarden", "run", "--", PY, "-c", "pass"], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
    finally:
        server.close()
    assert done.returncode == 3, done.stderr
    assert "1,200 records not shown" in done.stderr and "cut off: took no message" in done.stderr
    assert "keeps running" in done.stderr and "lost" not in done.stderr


def test_a_process_limit_found_by_the_sampler_terminates_the_session(lw: Harness) -> None:
    forks = "import subprocess, sys, time\n[subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']) " \
            "for _ in range(5)]\ntime.sleep(60)"
    sid = lw.run_detached(PY, "-c", forks, adapter="plain", sets=("limits.max_processes=3",))
    snap = lw.wait_state(sid, "terminated", timeout=60)
    assert snap["termination"] == "budget" and "process" in snap["termination_text"]


def test_logs_of_a_session_writing_as_fast_as_it_can_ends_at_what_was_stored_when_it_began(lw: Harness) -> None:
    sid = lw.run_detached(PY, str(AGENTS / "flood.py"), "100000000", name="busy")
    wait_for(lambda: lw.status(sid)["events"] > 20_000, timeout=60, what="a busy session")
    shown = lw.cli("logs", "--json", "--limit", "20000", sid, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert 20_000 <= len(shown.stdout.splitlines()) <= 2 * 20_000 + 100  # the newest of each table, no more
    lw.request("kill", session=sid)
