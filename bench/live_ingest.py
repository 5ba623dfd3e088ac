"""Live ingest (issue 16): the daemon's CPU per event against a bare asyncio Protocol reader.

    .venv/bin/python bench/live_ingest.py [--repeats 3] [--window 8] [--only flood,wakeup]

Two targets, each measured with its baseline interleaved in the same run (best of
--repeats), in CPU time (psutil cpu_times, user + system, all threads) because the
machine is shared:

(a) flood: 50 native sessions, each tests/agents/paced_flood.py offering --rate
    (1,200) events/s in ~10 ms ticks. Target: at least 50,000 events/s judged and
    stored, and the daemon's CPU per event within 3x of the baseline's.
(b) wakeup: 200 sessions at 20 events/s, one event per write (paced_flood.py with
    --tick 0.05). Target: the daemon's CPU per event within 2x of the baseline's.

The daemon is `loopwarden serve` in a temporary home (bench/live_common.py). Its
figures come from a steady-state window of --window seconds once every agent runs:
CPU of the serve process / event rows stored in that window (read-only SQLite).
Each agent runs a fixed time and ends with `done`; at the end every event it wrote
must be stored (its `done` says how many it wrote).

The baseline is a child process (this script with --reader) that starts the same
agents with asyncio's subprocess_exec and a SubprocessProtocol that splits each chunk
into lines and counts them, nothing else; its CPU and count are taken over the same
kind of window. The load average is printed beside each figure. Always exits 0.

Another checkout's daemon (the before figure) is measured from its directory, because
`python -m loopwarden serve` imports the package of the current directory first:

    cd /work/main && PYTHONPATH=$PWD PYTHONDONTWRITEBYTECODE=1 /path/to/.venv/bin/python /path/to/bench/live_ingest.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import AGENTS, FINAL, PY, BenchDaemon, leftovers, verdict_line, wait_for
from live_scale import BARRIER_CODE, all_states, blocked_on_fifo

PACED = str(AGENTS / "paced_flood.py")
WARMUP = 2.0  # seconds after every agent runs before the window opens


@dataclass
class Scenario:
    name: str
    sessions: int
    rate: float
    tick: float
    ratio_target: float
    rate_target: float = 0.0  # events/s stored, 0: none

    def agent(self, seconds: float, barrier: Path) -> list[str]:
        """paced_flood.py, started once the bench opens `barrier` (a FIFO): every agent starts at once."""
        return [PY, "-c", BARRIER_CODE, str(barrier), PACED, "--rate", f"{self.rate:g}", "--tick", f"{self.tick:g}",
                "--seconds", f"{seconds:g}"]


SCENARIOS = {
    "flood": Scenario("flood", 50, 1200.0, 0.01, 3.0, 50_000.0),
    "wakeup": Scenario("wakeup", 200, 20.0, 0.05, 2.0),
}


@dataclass
class Figure:
    cpu_us: float  # CPU per event, microseconds
    rate: float  # events per second in the window
    load: float  # 1-minute load average at the window's end
    stored_ok: bool = True
    note: str = ""


def cpu_of(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


# ---- the baseline: a bare asyncio Protocol reader ----------------------------

class Counter(asyncio.SubprocessProtocol):
    """Splits the agent's stdout into lines and counts them; nothing else."""

    lines = 0

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.buf = b""
        self.done = done

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1:
            return
        parts = (self.buf + data).split(b"\n")
        self.buf = parts.pop()
        Counter.lines += len(parts)

    def process_exited(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def reader(argv: list[str], sessions: int, barrier: Path) -> None:
    """Start `sessions` agents, release them at once; answer each line on stdin with the lines counted so far."""
    loop = asyncio.get_running_loop()
    waits = []
    pids = []
    for _ in range(sessions):
        done = loop.create_future()
        transport, _ = await loop.subprocess_exec(partial(Counter, done), *argv, stdin=subprocess.DEVNULL,
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                  start_new_session=True)
        pids.append(transport.get_pid())
        waits.append(done)
    wait_for(lambda: all(blocked_on_fifo(pid) for pid in pids), 180, "every agent at the start barrier", 0.2)
    os.close(os.open(barrier, os.O_WRONLY))  # releases every agent at once
    stdin = sys.stdin.fileno()

    def ask() -> None:
        if not os.read(stdin, 4096):
            loop.remove_reader(stdin)
            return
        os.write(1, f"{Counter.lines} {time.process_time()}\n".encode())

    loop.add_reader(stdin, ask)
    os.write(1, b"ready\n")
    await asyncio.gather(*waits)
    os.write(1, f"end {Counter.lines}\n".encode())


def run_baseline(sc: Scenario, window: float, seconds: float) -> Figure:
    home = Path(tempfile.mkdtemp(prefix="lw-ingest-reader-"))
    barrier = home / "start.fifo"
    os.mkfifo(barrier, 0o600)
    child = subprocess.Popen([PY, __file__, "--reader", sc.name, "--seconds", f"{seconds:g}",
                              "--barrier", str(barrier)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin and child.stdout
    try:
        assert child.stdout.readline().strip() == b"ready"

        def ask() -> tuple[int, float]:
            assert child.stdin and child.stdout
            child.stdin.write(b"?\n")
            child.stdin.flush()
            count, cpu = child.stdout.readline().split()
            return int(count), float(cpu)

        time.sleep(WARMUP)
        n0, c0 = ask()
        t0 = time.monotonic()
        time.sleep(window)
        n1, c1 = ask()
        t1 = time.monotonic()
        load = os.getloadavg()[0]
        child.stdin.close()
        tail = child.stdout.read().decode().split()
        child.wait(seconds + 30)
        total = int(tail[-1]) if tail and tail[-1].isdigit() else -1
        return Figure((c1 - c0) / max(n1 - n0, 1) * 1e6, (n1 - n0) / (t1 - t0), load,
                      note=f"{total:,} lines read in all")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        shutil.rmtree(home, ignore_errors=True)


# ---- the daemon ---------------------------------------------------------------

def stored_events(d: BenchDaemon) -> int:
    with d.db() as db:
        return int(db.execute("SELECT count(*) FROM events WHERE kind != 'log'").fetchone()[0])


def run_daemon(sc: Scenario, window: float, seconds: float) -> Figure:
    with BenchDaemon(f"ingest-{sc.name}") as d:
        assert d.ps is not None
        barrier = d.home / "start.fifo"
        os.mkfifo(barrier, 0o600)
        sids = [d.run(sc.agent(seconds, barrier), name=f"{sc.name}{i}") for i in range(sc.sessions)]

        def waiting() -> bool:  # every agent's interpreter is up and blocked on the barrier
            snaps = all_states(d, set(sids))
            if any(s.get("state") in FINAL for s in snaps.values()):
                raise RuntimeError(f"a session ended before the start barrier: {d.log_tail()}")
            pids = [int(s["pid"]) for s in snaps.values() if s.get("pid")]
            d.session_pids.update(pids)
            return len(pids) == sc.sessions and all(blocked_on_fifo(pid) for pid in pids)

        wait_for(waiting, 180, "every agent at the start barrier", 0.5)
        os.close(os.open(barrier, os.O_WRONLY))  # releases every agent at once
        time.sleep(WARMUP)
        n0, c0, t0 = stored_events(d), cpu_of(d.ps), time.monotonic()
        time.sleep(window)
        n1, c1, t1 = stored_events(d), cpu_of(d.ps), time.monotonic()
        load = os.getloadavg()[0]
        d.wait_final(sids, seconds + 120, 0.5)
        d.request("logs", session=sids[-1], after=0, limit=1)  # a reader: everything queued before it is written
        written = 0
        with d.db() as db:
            for (summary,) in db.execute("SELECT json_extract(data, '$.summary') FROM events WHERE kind = 'done'"):
                written += int(str(summary).split()[0]) + 2  # hello and done
            dones = db.execute("SELECT count(*) FROM events WHERE kind = 'done'").fetchone()[0]
            ends = dict(db.execute("SELECT coalesce(termination, state), count(*) FROM sessions GROUP BY 1"))
            verdicts = db.execute("SELECT rule, count(*) FROM verdicts GROUP BY 1").fetchall()
            dup = db.execute("SELECT count(*) - count(DISTINCT session_id || ':' || seq) FROM events"
                             " WHERE kind != 'log'").fetchone()[0]
            per = db.execute("SELECT session_id, count(*), max(seq), (SELECT json_extract(data, '$.summary') FROM"
                             " events d WHERE d.session_id = e.session_id AND d.kind = 'done') FROM events e"
                             " WHERE kind != 'log' GROUP BY session_id").fetchall()
        stored = stored_events(d)
        off = [p for p in per if p[3] is None or int(str(p[3]).split()[0]) + 2 != p[1]]
        if dup or off:
            print(f"    {dup} duplicate (session, seq) rows; sessions whose count is off: {off[:5]}")
        ok = dones == sc.sessions and stored == written
        note = (f"{stored:,} of {written:,} written events stored, {dones} of {sc.sessions} sessions done {ends}"
                + (f", verdicts {verdicts}" if verdicts else ""))
    left = leftovers(d)
    if left:
        note += f"; LEFT RUNNING: {left}"
    return Figure((c1 - c0) / max(n1 - n0, 1) * 1e6, (n1 - n0) / (t1 - t0), load, ok, note)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--window", type=float, default=8.0, help="seconds measured in each run (default 8)")
    ap.add_argument("--only", default="flood,wakeup", help="flood, wakeup or both (default)")
    ap.add_argument("--reader", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--barrier", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args()
    if args.reader:
        sc = SCENARIOS[args.reader]
        asyncio.run(reader(sc.agent(args.seconds, args.barrier), sc.sessions, args.barrier))
        return 0
    results = {}
    for name in args.only.split(","):
        sc = SCENARIOS[name]
        seconds = args.window + WARMUP + 2  # from the release at the barrier
        daemon: list[Figure] = []
        base: list[Figure] = []
        for i in range(args.repeats):
            for label, runner, into in (("daemon", run_daemon, daemon), ("reader", run_baseline, base)):
                fig = runner(sc, args.window, seconds)
                into.append(fig)
                print(f"  {name} run {i + 1} {label}: {fig.cpu_us:6.1f} us/event CPU, {fig.rate:9,.0f} events/s, "
                      f"load {fig.load:.1f}; {fig.note}", flush=True)
        # a window in which (almost) nothing was stored (the daemon starved by other work) measures nothing
        offered = sc.sessions * sc.rate
        measured = [f for f in daemon if f.rate > offered / 10] or daemon
        best_d = min(measured, key=lambda f: f.cpu_us)
        best_b = min(base, key=lambda f: f.cpu_us)
        ratio = best_d.cpu_us / best_b.cpu_us
        pairs = [d.cpu_us / b.cpu_us for d, b in zip(daemon, base, strict=True) if d.rate > offered / 10]
        rate = max(f.rate for f in daemon)
        stored_ok = all(f.stored_ok for f in daemon)
        print(f"{name}: {sc.sessions} sessions x {sc.rate:g} events/s offered (tick {sc.tick:g} s)")
        print(f"  daemon  {best_d.cpu_us:6.1f} us/event CPU (load {best_d.load:.1f}), stored {rate:,.0f} events/s")
        print(f"  reader  {best_b.cpu_us:6.1f} us/event CPU (load {best_b.load:.1f}), read {best_b.rate:,.0f} events/s")
        print(f"  ratio of each run to the reader's run beside it: {', '.join(f'{r:.2f}' for r in pairs)}")
        print("  " + verdict_line(ratio <= sc.ratio_target, f"ratio {ratio:.2f}, best to best "
                                                            f"(target <= {sc.ratio_target:g})"))
        if sc.rate_target:
            print("  " + verdict_line(rate >= sc.rate_target,
                                      f"{rate:,.0f} events/s judged and stored (target >= {sc.rate_target:,.0f})"))
        print("  " + verdict_line(stored_ok, "every event written was stored, in every run"))
        results[name] = {"daemon_us": best_d.cpu_us, "reader_us": best_b.cpu_us, "ratio": ratio, "pairs": pairs,
                         "rate": rate,
                         "stored_ok": stored_ok, "load": [f.load for f in daemon + base]}
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
