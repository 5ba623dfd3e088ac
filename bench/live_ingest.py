"""Live ingest: the daemon's CPU per event against a bare asyncio Protocol reader.

    .venv/bin/python bench/live_ingest.py [--repeats 3] [--window S] [--only flood,wakeup]
                                          [--before /a/checkout] [--py-spy /path/to/py-spy]

Two targets, each measured with its baseline interleaved in the same run, in CPU time
(psutil cpu_times, user + system, all threads) because the machine is shared:

(a) flood: 50 native sessions, each tests/agents/paced_flood.py offering --rate
    (1,200) events/s in ~10 ms ticks. Target: at least 50,000 events/s judged and
    stored, and the daemon's CPU per event within 3x of the baseline's.
(b) wakeup: 200 sessions at 20 events/s, one event per write (paced_flood.py with
    --tick 0.05). Target: the daemon's CPU per event within 2x of the baseline's.

The daemon is `loopwarden serve` in a temporary home (bench/live_common.py). Its
figures come from a steady-state window once every agent runs (default 8 s for the
flood, 15 s for the wake-ups): CPU of the serve process / event rows stored in that
window (read-only SQLite). Each agent runs a fixed time and ends with `done`; at the
end every event it wrote must be stored (its `done` says how many it wrote).

The baseline is a child process (this script with --reader) that starts the same
agents with asyncio's subprocess_exec and a SubprocessProtocol that splits each chunk
into lines and counts them, nothing else; its CPU and count are taken over the same
kind of window.

How the figures and ratios are formed: each repeat runs the daemon, then the reader
(then, with --before, the other checkout's daemon), one after the other. Every run is
printed with the load average at its window's end. A repeat's ratio is its daemon's
CPU per event over its reader's, measured within the same minute; the target is judged
on the MEDIAN of those per-repeat ratios (the reader's own figure moves up to twofold
with the load, since with 200 agents on 2 cores how many pipes one wake-up finds ready
depends on everything else running, and the ratio within one repeat cancels most of
that). The median daemon and reader figures and their quotient are printed beside it,
and the best-to-best ratio for comparison with older rows. A wake-up run in which the
daemon stored less than 90 % of what was offered was starved by other work (it then
reads many lines per wake-up, another scenario, and looks cheaper); a flood run that
stored under a tenth: either is printed and left out, unless no run kept up. The
stored rate is judged on the median too. Always exits 0.

--before DIR serves DIR's loopwarden (e.g. `git archive main | tar -x -C DIR`) in
the same repeats: the before and after figures then come from the same minutes.
--py-spy PATH records the daemon with py-spy (--nonblocking, raw collapsed stacks)
during each window into bench/out/; the CPU figures of such runs include py-spy's
reads of the daemon's memory and should not be compared with runs without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import AGENTS, FINAL, PY, BenchDaemon, engine_of, leftovers, verdict_line, wait_for
from live_scale import BARRIER_CODE, all_states, blocked_on_fifo

PACED = str(AGENTS / "paced_flood.py")
OUT = Path(__file__).resolve().parent / "out"
WARMUP = 2.0  # seconds after every agent runs before the window opens


@dataclass
class Scenario:
    name: str
    sessions: int
    rate: float
    tick: float
    ratio_target: float
    window: float  # seconds measured in each run, unless --window says otherwise
    kept_up: float  # share of the offered events a daemon must store in its window for the run to count
    rate_target: float = 0.0  # events/s stored, 0: none

    def agent(self, seconds: float, barrier: Path) -> list[str]:
        """paced_flood.py, started once the bench opens `barrier` (a FIFO): every agent starts at once."""
        return [PY, "-c", BARRIER_CODE, str(barrier), PACED, "--rate", f"{self.rate:g}", "--tick", f"{self.tick:g}",
                "--seconds", f"{seconds:g}"]


SCENARIOS = {
    "flood": Scenario("flood", 50, 1200.0, 0.01, 3.0, 8.0, 0.1, 50_000.0),
    "wakeup": Scenario("wakeup", 200, 20.0, 0.05, 2.0, 15.0, 0.9),
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


def thread_cpu(proc: psutil.Process) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of `proc`; the main thread's id is the pid."""
    return {t.id: t.user_time + t.system_time for t in proc.threads()}


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
        os.write(1, f"{Counter.lines} {time.process_time()} {resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw}\n"
                 .encode())

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

        def ask() -> tuple[int, float, int]:
            assert child.stdin and child.stdout
            child.stdin.write(b"?\n")
            child.stdin.flush()
            count, cpu, sleeps = child.stdout.readline().split()
            return int(count), float(cpu), int(sleeps)

        time.sleep(WARMUP)
        n0, c0, w0 = ask()
        t0 = time.monotonic()
        time.sleep(window)
        n1, c1, w1 = ask()
        t1 = time.monotonic()
        load = os.getloadavg()[0]
        child.stdin.close()
        tail = child.stdout.read().decode().split()
        child.wait(seconds + 30)
        total = int(tail[-1]) if tail and tail[-1].isdigit() else -1
        return Figure((c1 - c0) / max(n1 - n0, 1) * 1e6, (n1 - n0) / (t1 - t0), load,
                      note=f"{(w1 - w0) / max(n1 - n0, 1):.2f} sleeps per event; {total:,} lines read in all")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        shutil.rmtree(home, ignore_errors=True)


# ---- the daemon ---------------------------------------------------------------

def stored_events(d: BenchDaemon) -> int:
    with d.db() as db:
        return int(db.execute("SELECT count(*) FROM events WHERE kind != 'log'").fetchone()[0])


def run_daemon(sc: Scenario, window: float, seconds: float, checkout: Path | None = None,
               py_spy: str | None = None, label: str = "daemon", kept: bool = False) -> Figure:
    with BenchDaemon(f"ingest-{sc.name}", checkout=checkout, kept=kept) as d:
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
        spy = None
        if py_spy:
            OUT.mkdir(exist_ok=True)
            out = OUT / f"py-spy-{sc.name}-{label}-{time.strftime('%H%M%S')}.txt"
            spy = subprocess.Popen([py_spy, "record", "--nonblocking", "--threads", "--format", "raw", "--rate", "250",
                                    "--duration", f"{window:g}", "--pid", str(d.pid), "-o", str(out)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        keeper = psutil.Process(d.request("ping")["keeper"]["pid"]) if kept else None
        n0, c0, t0, w0 = stored_events(d), cpu_of(d.ps), time.monotonic(), d.ps.num_ctx_switches().voluntary
        h0, k0 = thread_cpu(d.ps), cpu_of(keeper) if keeper else 0.0
        time.sleep(window)
        n1, c1, t1, w1 = stored_events(d), cpu_of(d.ps), time.monotonic(), d.ps.num_ctx_switches().voluntary
        h1, k1 = thread_cpu(d.ps), cpu_of(keeper) if keeper else 0.0
        c1 += k1 - k0  # a kept agent's path: the daemon and the keeper
        if spy is not None:
            spy.wait(30)
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
        main = (h1.get(d.pid, 0.0) - h0.get(d.pid, 0.0)) / max(n1 - n0, 1) * 1e6
        rest = (c1 - c0) / max(n1 - n0, 1) * 1e6 - main  # the store's and other worker threads
        note = (f"{(w1 - w0) / max(n1 - n0, 1):.2f} sleeps (voluntary context switches) per event; "
                f"threads: main {main:.1f} us/event, the others {rest:.1f}; "
                + (f"the keeper {(k1 - k0) / max(n1 - n0, 1) * 1e6:.1f} us/event; " if keeper else "")
                + f"{stored:,} of {written:,} written events stored, {dones} of {sc.sessions} sessions done {ends}"
                + (f", verdicts {verdicts}" if verdicts else ""))
    left = leftovers(d)
    if left:
        note += f"; LEFT RUNNING: {left}"
    return Figure((c1 - c0) / max(n1 - n0, 1) * 1e6, (n1 - n0) / (t1 - t0), load, ok, note)


def kept_ratio(kept: list[Figure], direct: list[Figure]) -> dict[str, Any]:
    """The daemon and keeper's CPU per event over the direct daemon's, per repeat (target: at most 1.25)."""
    pairs = [k.cpu_us / d.cpu_us for k, d in zip(kept, direct, strict=True)]
    ratio = median(pairs)
    print(f"  kept: median {median([k.cpu_us for k in kept]):6.1f} us/event CPU, daemon and keeper (runs "
          f"{', '.join(f'{k.cpu_us:.1f}' for k in kept)}); over the direct daemon per repeat: "
          f"{', '.join(f'{r:.2f}' for r in pairs)}")
    print("    " + verdict_line(ratio <= 1.25, f"ratio {ratio:.2f}, kept / direct, the median per repeat "
                                              "(target <= 1.25)"))
    print("    " + verdict_line(all(k.stored_ok for k in kept), "every event written was stored, in every run"))
    return {"us": [k.cpu_us for k in kept], "pairs": pairs, "ratio": ratio}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--window", type=float, default=0.0,
                    help="seconds measured in each run (default: 8 for the flood, 15 for the wake-ups)")
    ap.add_argument("--only", default="flood,wakeup", help="flood, wakeup or both (default)")
    ap.add_argument("--before", type=Path, help="another checkout whose daemon runs in the same repeats")
    ap.add_argument("--kept", action="store_true",
                    help="also a daemon whose agents the keeper holds, its CPU with the keeper's (target <= 1.25x)")
    ap.add_argument("--py-spy", help="py-spy's path: record the daemon during each window (bench/out/)")
    ap.add_argument("--reader", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--barrier", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args()
    if args.reader:
        sc = SCENARIOS[args.reader]
        asyncio.run(reader(sc.agent(args.seconds, args.barrier), sc.sessions, args.barrier))
        return 0
    before = args.before.resolve() if args.before else None
    print(f"daemon: {engine_of()}" + (f"; before ({before}): {engine_of(before)}" if before else ""), flush=True)
    results = {}
    for name in args.only.split(","):
        sc = SCENARIOS[name]
        window = args.window or sc.window
        seconds = window + WARMUP + 2  # from the release at the barrier
        runs: dict[str, list[Figure]] = {"daemon": [], "reader": [], "before": [], "kept": []}
        runners: list[tuple[str, Callable[[], Figure]]] = [
            ("daemon", partial(run_daemon, sc, window, seconds, py_spy=args.py_spy)),
            ("reader", partial(run_baseline, sc, window, seconds))]
        if before is not None:
            runners.append(("before", partial(run_daemon, sc, window, seconds, before, args.py_spy, "before")))
        if args.kept:
            runners.append(("kept", partial(run_daemon, sc, window, seconds, label="kept", kept=True)))
        for i in range(args.repeats):
            for label, runner in runners:
                fig = runner()
                runs[label].append(fig)
                print(f"  {name} run {i + 1} {label}: {fig.cpu_us:6.1f} us/event CPU, {fig.rate:9,.0f} events/s, "
                      f"load {fig.load:.1f}; {fig.note}", flush=True)
        offered = sc.sessions * sc.rate
        base = runs["reader"]
        print(f"{name}: {sc.sessions} sessions x {sc.rate:g} events/s offered (tick {sc.tick:g} s), "
              f"{args.repeats} repeats of {window:g} s windows")
        for label in ("daemon", "before"):
            for i, f in enumerate(runs[label]):
                if f.rate < offered * sc.kept_up:
                    print(f"  {label} run {i + 1} stored {f.rate:,.0f} of {offered:,.0f} events/s: starved, left out")
        print(f"  reader  median {median([b.cpu_us for b in base]):6.1f} us/event CPU "
              f"(runs {', '.join(f'{b.cpu_us:.1f}' for b in base)}; loads {', '.join(f'{b.load:.1f}' for b in base)})")
        result: dict[str, Any] = {"reader_us": [b.cpu_us for b in base]}
        for label in ("daemon", "before") if before is not None else ("daemon",):
            daemon = runs[label]
            # a daemon that stored less than kept_up of what was offered in its window was starved by other work
            # (for the wake-ups it then read many lines per wake-up: another scenario); counted only if no run kept up
            kept = [(d, b) for d, b in zip(daemon, base, strict=True) if d.rate >= offered * sc.kept_up]
            if not kept:
                print(f"  {label}: no run kept up with {offered:,.0f} events/s (the machine is busy); all runs used")
                kept = list(zip(daemon, base, strict=True))
            pairs = [d.cpu_us / b.cpu_us for d, b in kept]
            ratio = median(pairs)
            med_d = median([d.cpu_us for d, _ in kept])
            best = min(d.cpu_us for d, _ in kept) / min(b.cpu_us for b in base) if kept else float("nan")
            rate = median([d.rate for d in daemon])
            stored_ok = all(f.stored_ok for f in daemon)
            title = "daemon" if label == "daemon" else f"before ({before})"
            print(f"  {title}: median {med_d:6.1f} us/event CPU (runs {', '.join(f'{d.cpu_us:.1f}' for d in daemon)};"
                  f" loads {', '.join(f'{d.load:.1f}' for d in daemon)}), stored {rate:,.0f} events/s (median; runs "
                  f"{', '.join(f'{d.rate:,.0f}' for d in daemon)})")
            print(f"    ratio per repeat (daemon / reader beside it): {', '.join(f'{r:.2f}' for r in pairs)}; "
                  f"median of medians {med_d / median([b.cpu_us for b in base]):.2f}; best to best {best:.2f}")
            print("    " + verdict_line(ratio <= sc.ratio_target, f"ratio {ratio:.2f}, the median per-repeat ratio "
                                                                  f"(target <= {sc.ratio_target:g})"))
            if sc.rate_target:
                print("    " + verdict_line(rate >= sc.rate_target, f"{rate:,.0f} events/s judged and stored, median "
                                                                     f"(target >= {sc.rate_target:,.0f})"))
            print("    " + verdict_line(stored_ok, "every event written was stored, in every run"))
            result[label] = {"us": [d.cpu_us for d in daemon], "pairs": pairs, "ratio": ratio, "rate": rate,
                             "stored_ok": stored_ok, "load": [f.load for f in daemon]}
        if args.kept:
            result["kept"] = kept_ratio(runs["kept"], runs["daemon"])
        results[name] = result
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
