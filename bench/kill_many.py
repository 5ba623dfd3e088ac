"""Killing many sessions: the daemon's CPU to end 200 live sessions, against doing it by hand.

    .venv/bin/python bench/kill_many.py [--sessions 200] [--repeats 1] [--skip-stop-daemon] [--keep]
                                        [--before /path/to/another/checkout]

(a) kill: a daemon (`loopwarden serve` in a temporary LOOPWARDEN_HOME) starts N
    plain-adapter sessions of a quiet agent (`python3 -c "import time;
    time.sleep(600)"`, which prints nothing). Once all run, their interpreters have
    started (their CPU stopped moving) and the daemon has settled, the benchmark
    sends one `kill` request per session, then waits until
    every session is final (one `status` of the oldest session not yet seen final
    every 0.2 s, so waiting costs the daemon next to nothing). Printed: the daemon's
    CPU time (psutil cpu_times user + system, all threads) from the first kill
    until the last session is final, and the wall time.
(b) stop-daemon: the same N sessions in a fresh daemon, ended by `stop-daemon`
    (every session killed at once); the daemon's CPU from the request until it
    exits (read from its /proc entry while it is a zombie, before it is reaped).
Baseline, in the same run: this process starts N of the same agents itself
(each in its own session, like the daemon does), then SIGKILLs and reaps them;
the CPU time this process spends doing that (getrusage, self only).

With --before DIR, each run is repeated, interleaved, by a daemon importing the loopwarden of
DIR (served from DIR with PYTHONPATH=DIR; e.g. `git archive main | tar -x -C DIR`), so a before
and an after come from the same minutes; they take turns going first.

Target: killing N=200 sessions costs the daemon under 0.3 s of CPU.
The load average is printed beside each figure (the machine is shared). Always exits 0.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import FINAL, BenchDaemon, engine_of, leftovers, verdict_line, wait_for

TARGET_S = 0.3
QUIET_CMD = ["python3", "-c", "import time; time.sleep(600)"]
SETTLE = 2.0  # seconds after every session runs, before measuring


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def system_cpu(proc: psutil.Process) -> float:
    return float(proc.cpu_times().system)


def daemon(label: str, keep: bool, before: str | None) -> BenchDaemon:
    """A bench daemon; with `before`, one importing the loopwarden of that checkout: served from its directory,
    since `python -m` puts the working directory before PYTHONPATH (PYTHONPATH alone, run from this checkout,
    served this checkout's loopwarden for the "before" too)."""
    return BenchDaemon(label, keep=keep, checkout=Path(before).resolve() if before else None)


def start_sessions(d: BenchDaemon, n: int) -> list[str]:
    sids = [d.run(QUIET_CMD, adapter="plain", name=f"quiet{i}") for i in range(n)]
    wanted = set(sids)

    def running() -> bool:
        snaps = {s["id"]: s for s in d.request("list") if s["id"] in wanted}
        for s in snaps.values():
            if s.get("pid"):
                d.session_pids.add(int(s["pid"]))
        bad = [s for s in snaps.values() if s.get("state") in FINAL]
        if bad:
            raise RuntimeError(f"session {bad[0]['id']} ended early: {bad[0].get('state')}")
        return len(snaps) == n and all(s.get("state") == "running" for s in snaps.values())

    wait_for(running, 180, f"{n} sessions to run", interval=0.5)
    wait_for(_agents_idle(d), 120, f"{n} agents to finish starting", interval=0.5)
    time.sleep(SETTLE)
    return sids


def _agents_idle(d: BenchDaemon) -> Callable[[], bool]:
    """True once the agents' CPU stopped moving between two calls: every interpreter has started and sleeps (a
    kill measured while 200 of them still start up is measured on a saturated machine)."""
    procs = [psutil.Process(pid) for pid in d.session_pids]
    last: list[float] = [-1.0]

    def idle() -> bool:
        total = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                continue
        was, last[0] = last[0], total
        return total == was

    return idle


def wait_all_final(d: BenchDaemon, sids: list[str], timeout: float = 120) -> None:
    """One cheap `status` per poll: the oldest session not yet seen final."""
    pending = list(sids)
    deadline = time.monotonic() + timeout
    while pending:
        if d.request("status", session=pending[0]).get("state") in FINAL:
            pending.pop(0)
            continue
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} sessions not final after {timeout:.0f}s")
        time.sleep(0.2)


def by_kill(n: int, keep: bool, before: str | None = None, py_spy: str | None = None) -> dict[str, float]:
    with daemon("killmany", keep, before) as d:
        assert d.ps is not None
        try:
            sids = start_sessions(d, n)
            spy = _record(py_spy, d.ps.pid, "before" if before else "after") if py_spy else None
            c0, s0, w0 = cpu(d.ps), system_cpu(d.ps), time.monotonic()
            for sid in sids:
                d.request("kill", session=sid, note="benchmark")
            wait_all_final(d, sids)
            c1, s1, w1 = cpu(d.ps), system_cpu(d.ps), time.monotonic()
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
                spy.wait(30)
            load = os.getloadavg()[0]
        finally:
            d.close()
        left = leftovers(d)
    return {"cpu": c1 - c0, "system": s1 - s0, "wall": w1 - w0, "load": load, "leftovers": float(len(left))}


def _record(py_spy: str, pid: int, label: str) -> subprocess.Popen[bytes]:
    """py-spy on the daemon from now until SIGINT, raw collapsed stacks into bench/out/. Only the thread holding
    the GIL is sampled; a holder preempted by the agents it just signalled still counts, so a `killpg` looks far
    dearer than its CPU (cProfile with `time.thread_time` puts all signals at 1 % of the kills)."""
    out = Path(__file__).resolve().parent / "out" / f"py-spy-kill-{label}-{time.strftime('%H%M%S')}.txt"
    out.parent.mkdir(exist_ok=True)
    print(f"py-spy: {out}", flush=True)
    argv = [py_spy, "record", "--nonblocking", "--threads", "--gil", "--format", "raw", "--rate", "1000"]
    spy = subprocess.Popen([*argv, "--pid", str(pid), "-o", str(out)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches before the first kill; an idle daemon costs it nothing meanwhile
    return spy


def zombie_cpu(proc: psutil.Process, timeout: float) -> float:
    """The CPU of a child process once it has exited, read before it is reaped."""
    last = cpu(proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return cpu(proc)
            last = cpu(proc)
        except psutil.Error:
            return last
        time.sleep(0.02)
    return last


def by_stop_daemon(n: int, keep: bool, before: str | None = None) -> dict[str, float]:
    with daemon("stopmany", keep, before) as d:
        assert d.ps is not None and d.proc is not None
        try:
            start_sessions(d, n)
            c0, w0 = cpu(d.ps), time.monotonic()
            try:
                d.request("shutdown")
            except Exception:  # noqa: BLE001 - the daemon may close the connection as it goes
                pass
            c1 = zombie_cpu(d.ps, 60)
            w1 = time.monotonic()
            load = os.getloadavg()[0]
        finally:
            d.close()
        left = leftovers(d)
    return {"cpu": c1 - c0, "wall": w1 - w0, "load": load, "leftovers": float(len(left))}


def baseline(n: int) -> dict[str, float]:
    """This process SIGKILLs and reaps N agents it started itself."""
    procs = [subprocess.Popen(QUIET_CMD, start_new_session=True, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(n)]
    wait_for(lambda: all(_sleeping(p.pid) for p in procs), 120, f"{n} agents to start", 0.2)
    r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    for p in procs:
        os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait()
        for stream in (p.stdout, p.stderr):
            if stream is not None:
                stream.close()
    r1, w1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    return {"cpu": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), "wall": w1 - w0,
            "load": os.getloadavg()[0]}


def _sleeping(pid: int) -> bool:
    try:
        return "sleep" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-stop-daemon", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary LOOPWARDEN_HOMEs")
    ap.add_argument("--before", metavar="DIR", help="also measure, interleaved, the loopwarden of this checkout")
    ap.add_argument("--py-spy", metavar="PATH", help="py-spy's path: record the daemon during the kills (bench/out/; "
                                                       "the CPU figures of such runs include py-spy's pauses)")
    args = ap.parse_args()
    n = args.sessions
    print(f"daemon: {engine_of()}" + (f"; before: {engine_of(Path(args.before).resolve())}" if args.before else ""),
          flush=True)
    kills, stops, bases = [], [], []
    kills_before, stops_before = [], []
    for repeat in range(args.repeats):
        bases.append(baseline(n))
        # before and after take turns going first: the second daemon of a pair starts while the first one's
        # agents are still being reaped, and paid for it (stop-daemon: 0.48 s first, 0.62-0.71 s second, same code)
        versions = [args.before, None] if args.before else [None]
        for before in versions if repeat % 2 == 0 else versions[::-1]:
            (kills_before if before else kills).append(by_kill(n, args.keep, before, args.py_spy))
        if not args.skip_stop_daemon:
            for before in versions if repeat % 2 == 0 else versions[::-1]:
                (stops_before if before else stops).append(by_stop_daemon(n, args.keep, before))
    lines = []
    for label, runs in (("baseline: SIGKILL + reap by hand", bases), ("before: kill request per session", kills_before),
                        ("kill request per session", kills), ("before: stop-daemon (end-all)", stops_before),
                        ("stop-daemon (end-all)", stops)):
        for r in runs:
            print(f"{label:34s} {n} sessions: CPU {r['cpu']:.3f} s"
                  + (f" (system {r['system']:.3f})" if "system" in r else "") + f", wall {r['wall']:.2f} s, "
                  f"load {r['load']:.2f}" + (f", leftovers {int(r['leftovers'])}" if "leftovers" in r else ""))
    best_base = min(r["cpu"] for r in bases)
    if kills:
        best = min(r["cpu"] for r in kills)
        ratio = best / max(best_base, 1e-6)
        was = f"; before {min(r['cpu'] for r in kills_before):.3f} s" if kills_before else ""
        lines.append(verdict_line(best < TARGET_S, f"kill {n} sessions: daemon CPU {best:.3f} s < {TARGET_S} s "
                                                   f"(baseline {best_base:.3f} s, ratio {ratio:.1f}x{was})"))
    if stops:
        best = min(r["cpu"] for r in stops)
        was = f"; before {min(r['cpu'] for r in stops_before):.3f} s" if stops_before else ""
        lines.append(verdict_line(best < TARGET_S, f"stop-daemon with {n} sessions: daemon CPU {best:.3f} s "
                                                   f"< {TARGET_S} s (informative: includes its shutdown{was})"))
    everything = kills + stops + kills_before + stops_before
    lines.append(verdict_line(not any(r["leftovers"] for r in everything), "no leftover processes"))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
