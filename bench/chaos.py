"""Chaos figures, measured against a real daemon: memory, time and loss under abuse.

    .venv/bin/python bench/chaos.py [--only deaf,subscriber,logs,history,newlines,sigkill] [--quick]

Each part runs its own `loopwarden serve` in a temporary LOOPWARDEN_HOME:

  deaf        a handshake agent that never reads its stdin (tests/agents/deaf_handshake.py):
              daemon RSS growth over the window, and how the session ended
  subscriber  a client subscribes to a session of 15 KB tool results (500 pairs/s) and never
              reads: daemon RSS growth, and whether the daemon cut the subscriber off
  logs        `loopwarden logs --json --limit 10000` over a session of 60 KB outputs: the
              daemon's peak RSS above its level before, for one call and five at once
  history     a store of 20,000 ended sessions (written before the daemon starts): start time,
              RSS, `list` and `subscribe` reply times, the slowest `ping` meanwhile (a hook call
              waits like a ping), and the RSS each ended session costs a running daemon
  newlines    32 MiB of bare newlines on one connection: how long the daemon takes to get
              through them, and the slowest `ping` from another client meanwhile
  sigkill     verdict_recorder agents (each records the seq of every verdict it receives)
              and plain floods; SIGKILL the daemon after 3 s: acknowledged events missing
              from the store
  flood       100 sessions of tests/agents/flood.py 1,500 at once: events stored against
              lines written, dropped_events, the daemon's peak RSS
  shutdown    an agent (and its children) ignoring SIGTERM, limits.kill_grace=60s: how long
              `loopwarden stop-daemon` takes to return, and processes left behind
  escapes     tests/agents/escaper.py (a setsid child and a double-forked grandchild), killed:
              processes left behind
  agents      an agent runs approve, kill (of another session), reset, inject, pause and
              stop-daemon from inside its session, directly and from a double-forked orphan:
              how many were carried out

Figures are printed as one report; the script always exits 0. Figures measured before and
after the daemon was bounded are in bench/HISTORY.md, "Chaos".
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import AGENTS, FINAL, PY, BenchDaemon, RssSampler, wait_for

from loopwarden.runtime.client import Client

MiB = 1 << 20


def rss(daemon: BenchDaemon) -> int:
    assert daemon.ps is not None
    return int(daemon.ps.memory_info().rss)


def mib(n: float) -> str:
    return f"{n / MiB:,.1f} MiB"


def raw_connect(daemon: BenchDaemon) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(daemon.paths.socket))
    return sock


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


class Pinger(threading.Thread):
    """Pings the daemon on its own connection in a loop; `.worst` is the slowest round trip."""

    def __init__(self, daemon: BenchDaemon) -> None:
        super().__init__(daemon=True)
        self.client = Client.connect(daemon.paths, autostart=False, name="pinger")
        self.times: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                took, _ = timed(lambda: self.client.request("ping"))
            except Exception:  # noqa: BLE001 - the daemon went away: the pinger stops
                return
            self.times.append(took)
            self.halt.wait(0.01)

    def stop(self) -> float:
        self.halt.set()
        self.join(30)
        self.client.close()
        return max(self.times, default=float("nan"))


def part_deaf(window: float) -> None:
    with BenchDaemon("chaos-deaf") as d:
        before = rss(d)
        sid = d.run([PY, str(AGENTS / "deaf_handshake.py")], name="deaf")
        sampler = RssSampler(d.ps, 0.5)  # type: ignore[arg-type]
        sampler.start()
        deadline = time.monotonic() + window
        snap = d.status(sid)
        while time.monotonic() < deadline and snap.get("state") not in FINAL:
            time.sleep(0.5)
            snap = d.status(sid)
        sampler.stop()
        grew = sampler.peak - before
        ended = f"{snap.get('state')}({snap.get('termination')}): {snap.get('termination_text')}" \
            if snap.get("state") in FINAL else f"still {snap.get('state')} after {window:.0f} s"
        print(f"deaf agent          RSS before {mib(before)}, peak {mib(sampler.peak)} (+{mib(grew)}, "
              f"{grew / MiB / window:.2f} MiB/s over {window:.0f} s); session: {ended}")


def part_subscriber(window: float) -> None:
    with BenchDaemon("chaos-sub") as d:
        sid = d.run([PY, str(AGENTS / "big_outputs.py"), "0", "15000", "--forever", "--rate", "500"],
                    name="big")
        wait_for(lambda: d.status(sid).get("events", 0) > 100, 30, "the session to start")
        before = rss(d)
        sock = raw_connect(d)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(orjson.dumps({"id": 1, "op": "subscribe", "sessions": [sid], "events": True}) + b"\n")
        sampler = RssSampler(d.ps, 0.5)  # type: ignore[arg-type]
        sampler.start()
        time.sleep(window)
        sampler.stop()
        sock.setblocking(False)
        cut = "open"
        try:
            data = sock.recv(1)
            cut = "cut off (closed)" if data == b"" else "open"
        except BlockingIOError:
            cut = "open"
        except OSError as exc:
            cut = f"cut off ({exc.__class__.__name__})"
        tail = _daemon_says(d, "subscriber")
        sock.close()
        grew = sampler.peak - before
        print(f"never-reading sub   RSS before {mib(before)}, peak {mib(sampler.peak)} (+{mib(grew)}) over "
              f"{window:.0f} s; subscriber {cut}{'; daemon: ' + tail if tail else ''}")


def _daemon_says(d: BenchDaemon, word: str) -> str:
    lines = [ln for ln in d.log_tail(200).splitlines() if word in ln]
    return lines[-1][20:160] if lines else ""


def part_logs(pairs: int) -> None:
    with BenchDaemon("chaos-logs") as d:
        sid = d.run([PY, str(AGENTS / "big_outputs.py"), str(pairs), "60000"], name="big")
        d.wait_final([sid], 600)
        d.request("ping")
        time.sleep(1.0)  # let the store settle before measuring the baseline
        before = rss(d)
        for n in (1, 5):
            sampler = RssSampler(d.ps, 0.05)  # type: ignore[arg-type]
            sampler.start()
            start = time.perf_counter()
            procs = [subprocess.Popen([PY, "-m", "loopwarden", "logs", "--json", "--limit", "10000", sid],
                                      env=d.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                     for _ in range(n)]
            codes = [p.wait(600) for p in procs]
            took = time.perf_counter() - start
            sampler.stop()
            errors = {p.stderr.read().decode(errors="replace").strip()[:120] for p in procs if p.stderr} - {""}
            print(f"logs --limit 10000  x{n}: daemon peak {mib(sampler.peak)} (+{mib(sampler.peak - before)} over "
                  f"{mib(before)}), {took:.1f} s, exit codes {sorted(set(codes))}"
                  + (f", stderr {sorted(errors)}" if errors else ""))
            time.sleep(1.0)


def _synthetic_history(d: BenchDaemon, count: int) -> None:
    """`count` ended sessions written straight into the store, shaped like a real one's row."""
    from loopwarden.runtime.store import Batch, Store

    sid = d.run([PY, "-c", "print('hi')"], adapter="plain", name="template")
    template = d.wait_final([sid], 60)[sid]
    d.close()  # the daemon must not hold the file while we write it
    store = Store.open(d.paths.database)
    rows = []
    now = time.time() - count
    for i in range(count):
        snap = {**template, "id": f"s{i + 2}", "name": f"agent-{i}", "created_at": now + i,
                "started_at": now + i, "ended_at": now + i + 1}
        rows.append({"id": snap["id"], "name": snap["name"], "adapter": "plain", "command": snap["command"],
                     "state": "exited", "created_at": snap["created_at"], "ended_at": snap["ended_at"],
                     "exit_code": 0, "snapshot": snap})
        if len(rows) == 1000:
            store.write(Batch(sessions_upsert=rows))
            rows = []
    if rows:
        store.write(Batch(sessions_upsert=rows))
    store.close()


def part_history(count: int, ended: int) -> None:
    d = BenchDaemon("chaos-history", keep=True)
    try:
        d.start()
        _synthetic_history(d, count)
        took, _ = timed(d.start)
        start_rss = rss(d)
        pinger = Pinger(d)
        pinger.start()
        list_took, listed = timed(lambda: d.request("list"))
        with Client.connect(d.paths, autostart=False, name="bench-console") as c:
            sub_took, first = timed(lambda: c.subscribe())
        worst = pinger.stop()
        shown = len(first[0]["sessions"]) if isinstance(first, tuple) else "?"
        print(f"history {count:,}      daemon start {took:.2f} s, RSS {mib(start_rss)}; list {list_took * 1000:.0f} ms "
              f"({len(listed):,} rows); subscribe {sub_took * 1000:.0f} ms ({shown} sessions); slowest ping "
              f"meanwhile {worst * 1000:.0f} ms")
        before = rss(d)
        sids = [d.run(["true"], adapter="plain", name=f"short{i}") for i in range(ended)]
        d.wait_final(sids, 300, interval=0.5)
        time.sleep(1.0)
        after = rss(d)
        print(f"ended sessions      {ended} short sessions: daemon RSS {mib(before)} -> {mib(after)} "
              f"({(after - before) / ended / 1024:,.1f} KiB each)")
    finally:
        d.keep = False
        d.close()


def part_newlines(size: int) -> None:
    with BenchDaemon("chaos-newlines") as d:
        pinger = Pinger(d)
        pinger.start()
        sock = raw_connect(d)
        start = time.perf_counter()
        chunk = b"\n" * MiB
        for _ in range(size // MiB):
            sock.sendall(chunk)
        sock.sendall(orjson.dumps({"id": 7, "op": "ping"}) + b"\n")
        reply = sock.makefile("rb").readline()
        took = time.perf_counter() - start
        worst = pinger.stop()
        sock.close()
        ok = b'"ok":true' in reply
        print(f"newline flood       {size // MiB} MiB of newlines then a ping: answered {ok} after {took:.2f} s; "
              f"slowest ping from another client meanwhile {worst * 1000:.0f} ms")


def part_sigkill(seconds: float) -> None:
    d = BenchDaemon("chaos-kill", keep=True)
    try:
        d.start()
        records = [d.home / f"acked{i}.txt" for i in range(4)]
        sids = [d.run([PY, str(AGENTS / "verdict_recorder.py"), str(r)], name=f"rec{i}")
                for i, r in enumerate(records)]
        floods = [d.run([PY, str(AGENTS / "flood.py"), "10000000"], name=f"flood{i}") for i in range(4)]
        time.sleep(seconds)
        os.kill(d.pid, signal.SIGKILL)
        assert d.proc is not None
        d.proc.wait(10)
        guardian = d.guardian
        if guardian is not None:
            try:
                guardian.wait(15)
            except (psutil.Error, psutil.TimeoutExpired):
                pass
        db = sqlite3.connect(f"file:{d.paths.database}?mode=ro", uri=True)
        acked = missing = 0
        for sid, record in zip(sids, records, strict=True):
            seqs = {int(x) for x in record.read_text().split()} if record.exists() else set()
            stored = {row[0] for row in db.execute("SELECT seq FROM events WHERE session_id = ?", (sid,))}
            acked += len(seqs)
            missing += len(seqs - stored)
        flood_stored = sum(db.execute("SELECT count(*) FROM events WHERE session_id = ?", (sid,)).fetchone()[0]
                           for sid in floods)
        db.close()
        print(f"SIGKILL mid-flood   {acked:,} events whose verdict reached the agent, {missing:,} of them "
              f"missing from the store ({100 * missing / max(acked, 1):.1f} %); the floods' events stored: "
              f"{flood_stored:,}")
    finally:
        d.proc = None  # already dead; close() must not signal a reused pid
        d.keep = False
        d.close()


def part_flood(sessions: int, events: int) -> None:
    with BenchDaemon("chaos-flood") as d:
        sampler = RssSampler(d.ps, 0.2)  # type: ignore[arg-type]
        sampler.start()
        sids = [d.run([PY, str(AGENTS / "flood.py"), str(events)], name=f"flood{i}") for i in range(sessions)]
        snaps = d.wait_final(sids, 900, interval=0.5)
        sampler.stop()
        d.request("logs", session=sids[0], limit=1)  # writes what is still queued
        with d.db() as db:
            stored = db.execute("SELECT count(*) FROM events").fetchone()[0]
        written = sessions * (events + 2)
        dropped = sum(s.get("dropped_events") or 0 for s in snaps.values())
        print(f"flood x{sessions:<12} {stored:,} of {written:,} lines stored ({100 * stored / written:.1f} %), "
              f"dropped_events {dropped}, daemon RSS peak {mib(sampler.peak)}")


def part_shutdown() -> None:
    d = BenchDaemon("chaos-shutdown")
    try:
        d.start()
        sid = d.run([PY, str(AGENTS / "ignore_sigterm.py")], adapter="plain", sets=["limits.kill_grace=60s"],
                    name="stubborn")
        wait_for(lambda: d.status(sid).get("processes", 0) >= 3, 30, "the agent's three processes")
        tree = [p.pid for p in psutil.Process(d.status(sid)["pid"]).children(recursive=True)]
        start = time.perf_counter()
        done = subprocess.run([PY, "-m", "loopwarden", "stop-daemon"], env=d.env, capture_output=True, text=True,
                              timeout=120, check=False)
        returned = time.perf_counter() - start
        assert d.proc is not None
        d.proc.wait(120)
        gone = time.perf_counter() - start
        left = [pid for pid in tree if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
        print(f"shutdown            kill_grace=60s, SIGTERM ignored: stop-daemon returned after {returned:.1f} s "
              f"(exit {done.returncode}), daemon gone after {gone:.1f} s, {len(left)} processes left")
    finally:
        d.close()


def part_escapes() -> None:
    with BenchDaemon("chaos-escapes") as d:
        sid = d.run([PY, str(AGENTS / "escaper.py")], adapter="plain", name="escaper")
        lines = wait_for(lambda: [e for e in d.logs(sid) if "double" in str(e.get("data"))], 30, "the escapees")
        pids = [int(x.split()[1]) for e in d.logs(sid) for x in [str((e.get("data") or {}).get("text", ""))]
                if x.split()[:1] in (["setsid"], ["double"])]
        d.request("kill", session=sid)
        d.wait_final([sid], 60)
        left = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
        print(f"escapes             setsid child and double-forked grandchild ({len(lines) and len(pids)} seen): "
              f"{len(left)} left after kill (containment: {d.request('ping').get('containment')})")


def part_agents() -> None:
    with BenchDaemon("chaos-agents") as d:
        other = d.run(["sleep", "600"], adapter="plain", name="other")
        report = d.home / "report.jsonl"
        commands = [["approve", f"{other}:g1"], ["kill", other], ["reset", other], ["inject", other, "hi"],
                    ["pause", other], ["stop-daemon"]]
        done = 0
        for mode in ("direct", "daemonised"):
            plan = d.home / f"plan-{mode}.json"
            plan.write_text(orjson.dumps({"mode": mode, "commands": commands}).decode())
            spec = {"command": [PY, str(AGENTS / "impostor.py"), str(plan), str(report)], "adapter": "plain",
                    "name": f"impostor-{mode}", "env": d.env}  # its own CLI finds this daemon, as a user's would
            try:
                d.request("run", spec=spec)
                wait_for(lambda: report.exists()
                         and report.read_text().count('"done"') >= (1 if mode == "direct" else 2),  # noqa: B023 - called in this iteration
                         120, f"the {mode} impostor's report")
            except Exception:  # noqa: BLE001 - the daemon may be gone: an impostor's stop-daemon was carried out
                break
        rows = [orjson.loads(line) for line in report.read_text().splitlines()]
        tried = [r for r in rows if "args" in r]
        for r in tried:
            if r["code"] == 0:
                print(f"  carried out: {r['args']}: {r['stdout'][:100]!r} {r['stderr'][:200]!r}")
        done = sum(1 for r in tried if r["code"] == 0)
        try:
            alive = d.status(other)["state"]
        except Exception:  # noqa: BLE001
            alive = "unknown (the daemon is gone)"
        print(f"agents as operator  {len(tried)} operator commands from inside sessions, {done} carried out; "
              f"the other session is {alive}, the daemon {'up' if d.proc and d.proc.poll() is None else 'DOWN'}")


PARTS = ("deaf", "subscriber", "logs", "history", "newlines", "sigkill", "flood", "shutdown", "escapes", "agents")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts to run")
    parser.add_argument("--quick", action="store_true", help="smaller sizes and windows")
    args = parser.parse_args()
    quick = args.quick
    print(f"bench/chaos.py on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}")
    for part in [p.strip() for p in args.only.split(",") if p.strip()]:
        try:
            if part == "deaf":
                part_deaf(5 if quick else 10)
            elif part == "subscriber":
                part_subscriber(10 if quick else 25)
            elif part == "logs":
                part_logs(500 if quick else 2000)
            elif part == "history":
                part_history(2000 if quick else 20_000, 50 if quick else 300)
            elif part == "newlines":
                part_newlines((4 if quick else 32) * MiB)
            elif part == "sigkill":
                part_sigkill(3.0)
            elif part == "flood":
                part_flood(40 if quick else 100, 1500)
            elif part == "shutdown":
                part_shutdown()
            elif part == "escapes":
                part_escapes()
            elif part == "agents":
                part_agents()
            else:
                print(f"unknown part {part!r}; parts: {', '.join(PARTS)}")
        except Exception as exc:  # noqa: BLE001 - one part's failure is a figure too
            print(f"{part:<19} failed: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
