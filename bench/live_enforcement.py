"""Enforcement latency: from the max_runtime deadline to the agent's process group being gone.

    .venv/bin/python bench/live_enforcement.py [--repeat 5] [--keep]

tests/agents/ignore_sigterm.py ignores SIGTERM in itself, a child and a
grandchild (all in one process group). It runs under a real daemon (temporary
LOOPWARDEN_HOME) with

    limits.max_runtime=1s  limits.kill_grace=0.2s

so the engine must terminate it after 1 s: `stop` line, SIGTERM to the group,
0.2 s of grace, then SIGKILL. The deadline is the session's `started_at`
(status op) + 1 s; "gone" is the first moment `os.killpg(pgid, 0)` raises
ProcessLookupError, polled every 1 ms (pgid = the session's pid). A zombie
still counts as a member of the group, so "gone" means every process of the
group was killed *and* reaped.

Target: the group is gone within grace + 0.3 s, i.e. <= 0.5 s after the deadline.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import AGENTS, PY, BenchDaemon, dead, group_alive, leftovers, verdict_line, wait_for

MAX_RUNTIME = 1.0
GRACE = 0.2
TARGET = GRACE + 0.3
SETS = [f"limits.max_runtime={MAX_RUNTIME:g}s", f"limits.kill_grace={GRACE:g}s"]


def members_from_logs(d: BenchDaemon, sid: str) -> list[int]:
    texts = [str((e.get("data") or {}).get("text", "")) for e in d.logs(sid) if e.get("kind") == "assistant_message"]
    return [int(t.split()[1]) for t in texts if t.startswith(("child ", "grandchild "))]


def one(d: BenchDaemon, i: int) -> dict[str, object]:
    sid = d.run([PY, str(AGENTS / "ignore_sigterm.py")], sets=SETS, name=f"ignore-sigterm-{i}")
    snap = wait_for(lambda: (lambda s: s if s.get("pid") and s.get("started_at") else None)(d.status(sid)),
                    10, "the session to start", interval=0.002)
    pgid, started = int(snap["pid"]), float(snap["started_at"])
    deadline = started + MAX_RUNTIME
    # the child and grandchild announce their pids; learn them well before the deadline
    members = [pgid] + wait_for(lambda: (lambda m: m if len(m) == 2 else None)(members_from_logs(d, sid)),
                                0.8, "the child and grandchild pids", interval=0.02)
    killed = None
    while True:
        now = time.time()
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            gone = now
            break
        except PermissionError:
            pass
        if killed is None and all(dead(p) for p in members):
            killed = now
        if now > deadline + 30:
            raise TimeoutError(f"process group {pgid} still alive 30 s after the deadline")
        time.sleep(0.001)
    if killed is None:
        killed = gone
    final = d.wait_final([sid], timeout=30)[sid]
    verdicts = d.request("logs", session=sid)["verdicts"]
    return {"session": sid, "pgid": pgid, "after_deadline": gone - deadline, "killed": killed - deadline,
            "state": final.get("state"), "termination": final.get("termination"),
            "exit_code": final.get("exit_code"), "rules": [f"{v['action']}/{v['rule']}" for v in verdicts],
            "members": len(members), "ended_after_deadline": (final.get("ended_at") or 0) - deadline}


def orphan_reaping() -> float:
    """How long pid 1 (or the nearest subreaper) takes to reap an orphaned, killed grandchild here."""
    code = ("import subprocess,sys,time; q=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']);"
            "print(q.pid, flush=True); time.sleep(60)")
    p = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert p.stdout
        p.stdout.readline()
        t0 = time.time()
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        while group_alive(p.pid) and time.time() - t0 < 30:
            time.sleep(0.001)
        return time.time() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the temporary LOOPWARDEN_HOME")
    args = ap.parse_args()

    print(f"live enforcement: ignore_sigterm.py with {' '.join(SETS)}; {args.repeat} runs; "
          f"load average {os.getloadavg()[0]:.2f}")
    reap = orphan_reaping()
    try:
        with open("/proc/1/cmdline", "rb") as f:
            pid1 = f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        pid1 = "?"
    results = []
    with BenchDaemon("enforce", keep=args.keep) as d:
        try:
            for i in range(args.repeat):
                results.append(one(d, i))
        finally:
            d.close()
        left = leftovers(d)

    print()
    print("times are after the deadline (started_at + 1 s):")
    print("  killed = every member (leader, child, grandchild) gone or a zombie")
    print("  gone   = os.killpg(pgid, 0) raises ProcessLookupError (zombies reaped too)")
    print("  ended  = the session's ended_at (the daemon is done with it)")
    print()
    print(f"{'run':>3} {'session':>8} {'pgid':>8} {'killed':>10} {'gone':>10} {'ended':>10} {'procs':>6}  "
          f"state / termination")
    for i, r in enumerate(results, 1):
        print(f"{i:>3} {r['session']:>8} {r['pgid']:>8} {r['killed'] * 1000:>7.1f} ms "
              f"{r['after_deadline'] * 1000:>7.1f} ms "
              f"{r['ended_after_deadline'] * 1000:>7.1f} ms {r['members']:>6}  "
              f"{r['state']} / {r['termination']} (exit {r['exit_code']}; {', '.join(r['rules'])})")
    worst = max(r["after_deadline"] for r in results)
    worst_killed = max(r["killed"] for r in results)
    print(f"max: killed {worst_killed * 1000:.1f} ms, gone {worst * 1000:.1f} ms "
          f"(grace {GRACE * 1000:.0f} ms)")
    print(f"this machine: an orphaned, SIGKILLed grandchild is reaped by pid 1 after {reap * 1000:.0f} ms "
          f"(pid 1: {pid1})")
    print()
    terminated = all(r["state"] == "terminated" and r["termination"] == "max_runtime" for r in results)
    print(verdict_line(terminated, "every run ended as terminated / max_runtime"))
    print(verdict_line(worst <= TARGET, f"group gone: max {worst * 1000:.1f} ms <= {TARGET * 1000:.0f} ms after "
                                        f"the deadline (grace + 300 ms)"))
    print(verdict_line(worst_killed <= TARGET, f"group killed (zombies allowed): max {worst_killed * 1000:.1f} ms "
                                               f"<= {TARGET * 1000:.0f} ms after the deadline"))
    if worst > TARGET >= worst_killed:
        print("  note: the processes were dead in time; what is left are zombies of the child and grandchild,"
              " orphaned to pid 1, which reaps them late on this machine. The daemon is not a child subreaper.")
    print(verdict_line(not left, "no leftover processes" + (f": {', '.join(left)}" if left else "")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
