"""Scale: many sessions in one daemon: stored throughput under a flood, and idle overhead.

    .venv/bin/python bench/live_scale.py [--flood-sessions 100] [--events 1500]
                                         [--idle-sessions 200] [--idle-window 20] [--keep]
                                         [--skip-flood] [--skip-idle]

Each part runs its own daemon (`loopwarden serve` in a temporary LOOPWARDEN_HOME).

(a) flood: N concurrent native sessions, each tests/agents/flood.py EVENTS
    (hello + EVENTS varied events + done, as fast as the pipe takes them). So
    that all N really flood at once, each session's interpreter starts, then
    blocks opening a FIFO (a start barrier) and runs flood.py (runpy, same
    process) when the benchmark opens the FIFO for writing, after every session
    is waiting there. Measured from that release until every session has ended:
    * events STORED per second: rows of `events` in the daemon's SQLite file for
      these sessions (read-only connection) / (last ended_at - release);
      stored vs emitted (N x (EVENTS + 2)), the engine's own count (status
      `events`) and each session's dropped_events;
    * daemon CPU: psutil cpu_times (user + system, all threads) of the serve
      process, as % of one core over the same window;
    * daemon RSS, sampled every 0.5 s: start (before the first run), ready (all
      at the barrier), peak, end (after every session ended and the store was
      flushed);
    * control-plane responsiveness: `ping` round trips on a separate connection.
(b) idle: first the daemon's CPU with no session (5 s), for reference; then M
    plain-adapter sessions `python3 -c "import time; time.sleep(600)"`. Once all
    are running and 5 s have passed, the daemon's CPU (user + system, all
    threads) over WINDOW s as % of one core. Then every session is killed.

Targets: idle overhead under 2% of one core for 200 sessions; RSS flat under a
flood (checked as: the RSS at the end of the flood's second half no more than
10% above the peak of its first half, i.e. memory does not grow with the number
of events; run with --events 1500 and --events 4500 to see the plateau is the
same; it is per concurrent session and the daemon's bounded backlog). Stored == emitted and no
dropped events is checked too. The script always exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import AGENTS, FINAL, PY, BenchDaemon, RssSampler, leftovers, pct, verdict_line, wait_for

from loopwarden.runtime.client import Client

MiB = 1 << 20
IDLE_TARGET = 2.0  # % of one core
IDLE_CMD = ["python3", "-c", "import time; time.sleep(600)"]


# Start every flood at once: the interpreter starts, blocks opening a FIFO until the
# benchmark opens it for writing, then runs flood.py as __main__ (same process).
BARRIER_CODE = ("import runpy, sys; open(sys.argv[1], 'rb').close(); sys.argv = sys.argv[2:]; "
                "runpy.run_path(sys.argv[0], run_name='__main__')")


def blocked_on_fifo(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/wchan") as f:
            w = f.read()
            return "fifo" in w or "wait_for_partner" in w
    except OSError:
        return False


class PingSampler(threading.Thread):
    """Control-plane responsiveness: a `ping` round trip on its own connection every 0.2 s."""

    def __init__(self, d: BenchDaemon, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.client = Client.connect(d.paths, autostart=False, name="bench-ping")
        self.every = every
        self.rtts: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                t = time.perf_counter()
                self.client.request("ping")
                self.rtts.append(time.perf_counter() - t)
                self.halt.wait(self.every)
        except Exception:  # noqa: BLE001 - the daemon went away: the pinger stops
            pass
        finally:
            self.client.close()


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def all_states(d: BenchDaemon, sids: set[str]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in d.request("list") if s["id"] in sids}


def flood(args: argparse.Namespace) -> dict[str, Any]:
    n, events = args.flood_sessions, args.events
    out: dict[str, Any] = {}
    with BenchDaemon("flood", keep=args.keep) as d:
        try:
            assert d.ps is not None
            time.sleep(0.5)
            sampler = RssSampler(d.ps)
            rss_start = d.ps.memory_info().rss
            sampler.start()
            t_first = time.monotonic()
            barrier = d.home / "start.fifo"
            os.mkfifo(barrier, 0o600)
            command = [PY, "-c", BARRIER_CODE, str(barrier), str(AGENTS / "flood.py"), str(events)]
            sids = [d.run(command, name=f"flood{i}") for i in range(n)]
            wanted = set(sids)
            snaps: dict[str, dict[str, Any]] = {}

            def waiting() -> bool:  # every interpreter is up and blocked on the barrier
                snaps.update(all_states(d, wanted))
                for s in snaps.values():
                    if s.get("pid"):
                        d.session_pids.add(int(s["pid"]))
                if any(s.get("state") in FINAL for s in snaps.values()):
                    raise RuntimeError("a flood session ended before the start barrier")
                return len(snaps) == n and all(blocked_on_fifo(int(s["pid"])) for s in snaps.values()
                                               if s.get("pid")) and all(s.get("pid") for s in snaps.values())

            wait_for(waiting, 120, f"{n} flood sessions to reach the start barrier", interval=0.5)
            t_launched = time.monotonic()
            rss_ready = d.ps.memory_info().rss
            cpu0, t0 = cpu(d.ps), time.monotonic()
            pinger = PingSampler(d)
            pinger.start()
            release_wall = time.time()
            fd = os.open(barrier, os.O_WRONLY)  # releases every reader at once
            os.close(fd)

            def ended() -> bool:
                snaps.update(all_states(d, wanted))
                for s in snaps.values():
                    if s.get("pid"):
                        d.session_pids.add(int(s["pid"]))
                return len(snaps) == n and all(s.get("state") in FINAL for s in snaps.values())

            wait_for(ended, 170, f"{n} flood sessions to end", interval=0.5)
            t_end = time.monotonic()
            cpu1 = cpu(d.ps)
            pinger.halt.set()
            pinger.join(30)
            d.request("logs", session=sids[0], limit=1)  # flushes the pending batch to the store
            time.sleep(0.6)
            sampler.halt.set()
            sampler.join()
            rss_end = d.ps.memory_info().rss
            with d.db() as db:
                marks = ",".join("?" * n)
                stored = db.execute(f"SELECT count(*) FROM events WHERE kind != 'log' AND session_id IN ({marks})",
                                    sids).fetchone()[0]
                logs = db.execute(f"SELECT count(*) FROM events WHERE kind = 'log' AND session_id IN ({marks})",
                                  sids).fetchone()[0]
                verdicts = db.execute(f"SELECT count(*) FROM verdicts WHERE session_id IN ({marks})",
                                      sids).fetchone()[0]
            last_end = max(float(s["ended_at"]) for s in snaps.values())
            first_start = release_wall
            samples = sampler.samples
            mid = t0 + (t_end - t0) / 2
            first_half = [r for t, r in samples if t0 <= t <= mid] or [rss_ready]
            second_half = [r for t, r in samples if mid < t <= t_end] or [rss_end]
            out.update(
                sessions=n, events_per_session=events, emitted=n * (events + 2), stored=stored, log_rows=logs,
                verdicts=verdicts, counted=sum(int(s.get("events") or 0) for s in snaps.values()),
                dropped=sum(int(s.get("dropped_events") or 0) for s in snaps.values()),
                stdin_dropped=sum(int(s.get("stdin_dropped") or 0) for s in snaps.values()),
                states={st: sum(1 for s in snaps.values() if s.get("state") == st)
                        for st in {s.get("state") for s in snaps.values()}},
                exit_codes=sorted({s.get("exit_code") for s in snaps.values()}, key=str),
                launch_s=t_launched - t_first, rss_ready=rss_ready, window_s=last_end - first_start,
                cpu_pct=100 * (cpu1 - cpu0) / (last_end - first_start),
                rss_start=rss_start, rss_peak=max([r for _, r in samples] + [rss_start, rss_end]),
                rss_end=rss_end, rss_first_half_peak=max(first_half), rss_second_half_last=second_half[-1],
                rss_samples=len(samples), loadavg=os.getloadavg()[0], pings=pinger.rtts,
            )
        finally:
            d.close()
        out["leftovers"] = leftovers(d)
    return out


def idle(args: argparse.Namespace) -> dict[str, Any]:
    m = args.idle_sessions
    out: dict[str, Any] = {}
    with BenchDaemon("idle", keep=args.keep) as d:
        try:
            assert d.ps is not None
            time.sleep(1.0)
            e0, we0 = cpu(d.ps), time.monotonic()
            time.sleep(args.empty_window)
            empty_pct = 100 * (cpu(d.ps) - e0) / (time.monotonic() - we0)
            t0 = time.monotonic()
            sids = [d.run(IDLE_CMD, adapter="plain", name=f"idle{i}") for i in range(m)]
            wanted = set(sids)

            def running() -> bool:
                snaps = all_states(d, wanted)
                for s in snaps.values():
                    if s.get("pid"):
                        d.session_pids.add(int(s["pid"]))
                bad = [s for s in snaps.values() if s.get("state") in FINAL]
                if bad:
                    raise RuntimeError(f"idle session {bad[0]['id']} ended: {bad[0].get('state')}")
                return len(snaps) == m and all(s.get("state") == "running" for s in snaps.values())

            wait_for(running, 120, f"{m} idle sessions to run", interval=0.5)
            t_running = time.monotonic() - t0
            time.sleep(args.settle)
            rss0 = d.ps.memory_info().rss
            threads0 = d.ps.num_threads()
            t0_, w0 = d.ps.cpu_times(), time.monotonic()
            cpu0 = t0_.user + t0_.system
            time.sleep(args.idle_window)
            t1_, w1 = d.ps.cpu_times(), time.monotonic()
            cpu1 = t1_.user + t1_.system
            rss1 = d.ps.memory_info().rss
            out.update(sessions=m, start_s=t_running, empty_pct=empty_pct, empty_window=args.empty_window,
                       settle_s=args.settle, window_s=w1 - w0,
                       cpu_s=cpu1 - cpu0, cpu_pct=100 * (cpu1 - cpu0) / (w1 - w0),
                       user_pct=100 * (t1_.user - t0_.user) / (w1 - w0),
                       sys_pct=100 * (t1_.system - t0_.system) / (w1 - w0), rss0=rss0, rss1=rss1,
                       threads=threads0, loadavg=os.getloadavg()[0])
            t_kill = time.monotonic()
            for sid in sids:
                d.request("kill", session=sid, note="benchmark done")
            d.wait_final(sids, timeout=60, interval=0.2)
            out["kill_all_s"] = time.monotonic() - t_kill
        finally:
            d.close()
        out["leftovers"] = leftovers(d)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flood-sessions", type=int, default=100)
    ap.add_argument("--events", type=int, default=1500, help="events per flood session (default 1500)")
    ap.add_argument("--idle-sessions", type=int, default=200)
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--idle-window", type=float, default=20.0)
    ap.add_argument("--empty-window", type=float, default=5.0, help="CPU of the daemon with no session, first")
    ap.add_argument("--skip-flood", action="store_true")
    ap.add_argument("--skip-idle", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary LOOPWARDEN_HOME directories")
    args = ap.parse_args()
    print(f"live scale: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    lines: list[str] = []

    if not args.skip_flood:
        f = flood(args)
        rate = f["stored"] / f["window_s"] if f["window_s"] else 0.0
        print()
        print(f"(a) flood: {f['sessions']} sessions x flood.py {f['events_per_session']:,} "
              f"(load average at the end {f['loadavg']:.2f})")
        rows = [
            ("launch (run .. all at the barrier)", f"{f['launch_s']:.2f} s"),
            ("window (release .. last ended_at)", f"{f['window_s']:.2f} s"),
            ("emitted lines", f"{f['emitted']:,}"),
            ("stored event rows", f"{f['stored']:,}  (+{f['log_rows']} log rows, {f['verdicts']} verdicts)"),
            ("engine-counted events (status)", f"{f['counted']:,}"),
            ("dropped_events (sum)", f"{f['dropped']:,}"),
            ("events stored / s", f"{rate:,.0f}"),
            ("daemon CPU (all threads)", f"{f['cpu_pct']:.0f}% of one core over the window"),
            ("RSS start / ready / peak / end", f"{f['rss_start'] / MiB:.1f} / {f['rss_ready'] / MiB:.1f} / "
                                                      f"{f['rss_peak'] / MiB:.1f} / {f['rss_end'] / MiB:.1f} MiB "
                                                      f"({f['rss_samples']} samples)"),
            ("RSS 1st-half peak / 2nd-half last", f"{f['rss_first_half_peak'] / MiB:.1f} / "
                                                  f"{f['rss_second_half_last'] / MiB:.1f} MiB"),
            ("ping round trip during the flood", f"p50 {pct(f['pings'], 0.5) * 1000:.1f} ms, max "
                                                 f"{max(f['pings'] or [float('nan')]) * 1000:.0f} ms "
                                                 f"({len(f['pings'])} pings, one every 0.2 s + its own wait)"),
            ("final states", f"{f['states']} exit codes {f['exit_codes']}"),
        ]
        for k, v in rows:
            print(f"  {k:<38}{v}")
        complete = f["stored"] == f["emitted"] and f["dropped"] == 0
        lines.append(verdict_line(complete, f"flood: stored {f['stored']:,} == emitted {f['emitted']:,}, "
                                            f"dropped_events {f['dropped']}"))
        flat = f["rss_second_half_last"] <= 1.10 * f["rss_first_half_peak"]
        lines.append(verdict_line(flat, f"flood: RSS flat (2nd half {f['rss_second_half_last'] / MiB:.1f} <= "
                                        f"1.1 x 1st-half peak {f['rss_first_half_peak'] / MiB:.1f} MiB; plateau "
                                        f"{(f['rss_peak'] - f['rss_ready']) / MiB:.0f} MiB above ready, for "
                                        f"{args.flood_sessions} flooding sessions)"))
        lines.append(verdict_line(not f["leftovers"], "flood: no leftover processes"
                                  + (f": {', '.join(f['leftovers'])}" if f["leftovers"] else "")))

    if not args.skip_idle:
        i = idle(args)
        print()
        print(f"(b) idle: {i['sessions']} plain sessions `{' '.join(IDLE_CMD)}` "
              f"(load average at the end {i['loadavg']:.2f})")
        rows = [
            ("daemon CPU with no session", f"{i['empty_pct']:.2f}% of one core over {i['empty_window']:.0f} s"),
            ("all running after", f"{i['start_s']:.1f} s (+ {i['settle_s']:.0f} s settling)"),
            ("daemon CPU", f"{i['cpu_s']:.2f} s over {i['window_s']:.1f} s = {i['cpu_pct']:.2f}% of one core "
                           f"(user {i['user_pct']:.2f}%, system {i['sys_pct']:.2f}%)"),
            ("per session", f"{i['cpu_pct'] / i['sessions'] * 1000:.1f} milli-% of a core"),
            ("daemon RSS", f"{i['rss0'] / MiB:.1f} -> {i['rss1'] / MiB:.1f} MiB, {i['threads']} threads"),
            ("kill all + wait final", f"{i.get('kill_all_s', float('nan')):.1f} s"),
        ]
        for k, v in rows:
            print(f"  {k:<38}{v}")
        lines.append(verdict_line(i["cpu_pct"] < IDLE_TARGET, f"idle: {i['cpu_pct']:.2f}% of one core for "
                                                              f"{i['sessions']} sessions < {IDLE_TARGET}%"))
        lines.append(verdict_line(not i["leftovers"], "idle: no leftover processes"
                                  + (f": {', '.join(i['leftovers'])}" if i["leftovers"] else "")))
    print()
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
