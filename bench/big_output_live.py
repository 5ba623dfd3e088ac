"""Memory of the LIVE daemon judging one very large accepted tool output (target: under 20 MiB for 100 MB).

    .venv/bin/python bench/big_output_live.py            # a 100 MB output
    .venv/bin/python bench/big_output_live.py --mb 40 --runs 3

Starts its own daemon (bench/live_common.py BenchDaemon, a temporary LOOPWARDEN_HOME) and launches a native
agent (this script with --_agent) that writes the stream of bench/big_output.py: a tool_call, one tool_result
line whose `output` is --mb megabytes of text with escaped newlines, quotes and non-ASCII, then done; the
session runs with `limits.max_line_bytes=1GiB`, so the line is accepted and its output spilled.
A 2 MB warm-up session runs first (imports, the store, the spill directory). Then the daemon's peak RSS is
reset (/proc/PID/clear_refs) and the big session runs; the bench waits until the session has ended, its
spill verdict is stored and the spill file holds the whole output, and reads the daemon's VmHWM:
  growth = VmHWM after - VmRSS before.
Baseline, in the same run: the same agent piped into a bare reader process that reads it in 1 MiB chunks
(its own peak RSS growth). Prints both, the load average, and PASS when the daemon grows < 20 MiB.
Always exits 0: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from big_output import write_to
from live_common import PY, BenchDaemon, RssSampler, leftovers, wait_for

TARGET = 20 << 20
WARMUP_MB = 2
SETS = ["limits.max_line_bytes=1GiB"]


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def proc_status(pid: int, key: str) -> int:
    """A `kB` field of /proc/PID/status, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for row in f:
            if row.startswith(key + ":"):
                return int(row.split()[1]) * 1024
    raise KeyError(key)


def reset_peak(pid: int) -> bool:
    """Reset the process's VmHWM to its current RSS (Linux clear_refs 5); False when not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def agent(mb: int) -> None:
    """The agent: the stream on stdout."""
    with os.fdopen(sys.stdout.fileno(), "wb", closefd=False) as out:
        write_to(out, mb * 1_000_000)


def reader() -> None:
    """The baseline: read stdin in 1 MiB chunks; print the peak RSS growth."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    n = 0
    with os.fdopen(sys.stdin.fileno(), "rb", closefd=False) as f:
        while chunk := f.read(1 << 20):
            n += len(chunk)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"growth": rss - rss0, "bytes": n}))


def agent_command(mb: int) -> list[str]:
    return [PY, str(Path(__file__).resolve()), "--_agent", str(mb)]


def baseline(mb: int) -> dict[str, Any]:
    writer = subprocess.Popen(agent_command(mb), stdout=subprocess.PIPE)
    assert writer.stdout is not None
    proc = subprocess.run([PY, str(Path(__file__).resolve()), "--_reader"], stdin=writer.stdout,
                          capture_output=True, text=True, check=True)
    writer.stdout.close()
    writer.wait()
    return json.loads(proc.stdout)


def spill_bytes(d: BenchDaemon) -> int:
    spill = d.paths.spill
    return sum(p.stat().st_size for p in spill.iterdir()) if spill.exists() else 0


def live_session(d: BenchDaemon, mb: int, text_bytes: int, timeout: float) -> dict[str, Any]:
    """Run one big-output session; the daemon's figures once it is judged and its spill file is whole."""
    before_files = spill_bytes(d)
    sid = d.run(agent_command(mb), sets=SETS, name=f"big{mb}")
    d.wait_final([sid], timeout)
    wait_for(lambda: spill_bytes(d) - before_files >= text_bytes, timeout, "the whole spill file")
    verdicts = [f"{v['action']}:{v['rule']}" for v in d.request("logs", session=sid)["verdicts"]]
    if not any(v.startswith("spill:") for v in verdicts):
        raise SystemExit(f"the big output was not spilled: {verdicts}\n{d.log_tail()}")
    return {"sid": sid, "verdicts": verdicts, "spilled": spill_bytes(d) - before_files}


def run_once(d: BenchDaemon, mb: int, text_bytes: int, timeout: float) -> dict[str, Any]:
    assert d.ps is not None
    pid = d.pid
    reset = reset_peak(pid)
    rss0 = proc_status(pid, "VmRSS")
    hwm0 = proc_status(pid, "VmHWM")
    sampler = RssSampler(d.ps, every=0.05)
    sampler.start()
    cpu0 = sum(d.ps.cpu_times()[:2])
    t0 = time.monotonic()
    got = live_session(d, mb, text_bytes, timeout)
    wall = time.monotonic() - t0
    cpu = sum(d.ps.cpu_times()[:2]) - cpu0
    sampler.stop()
    hwm = proc_status(pid, "VmHWM")
    growth = hwm - (rss0 if reset else hwm0)
    return {**got, "growth": growth, "sampled_peak": max(sampler.peak - rss0, 0), "rss0": rss0, "cpu": cpu,
            "wall": wall, "reset": reset}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=100, help="size of the output in MB (default 100)")
    p.add_argument("--runs", type=int, default=1, help="big sessions, one after the other (default 1)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for one session")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    p.add_argument("--_agent", type=int, help=argparse.SUPPRESS)
    p.add_argument("--_reader", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._agent is not None:
        agent(a._agent)
        return 0
    if a._reader:
        reader()
        return 0
    with open(os.devnull, "wb") as null:
        line, text_bytes = write_to(null, a.mb * 1_000_000)
        _, warm_bytes = write_to(null, WARMUP_MB * 1_000_000)
    load = os.getloadavg()[0]
    if not a.json:
        print(f"stream: one tool_result line of {line:,} bytes ({mib(line)}), output {text_bytes:,} bytes "
              f"UTF-8; load average {load:.2f}")
    base = baseline(a.mb)
    runs = []
    with BenchDaemon("bigline") as d:
        live_session(d, WARMUP_MB, warm_bytes, a.timeout)
        for _ in range(a.runs):
            runs.append(run_once(d, a.mb, text_bytes, a.timeout))
        left = d
    stray = leftovers(left)
    worst = max(r["growth"] for r in runs)
    if a.json:
        print(json.dumps({"line": line, "baseline": base["growth"], "growth": [r["growth"] for r in runs],
                          "cpu": [r["cpu"] for r in runs], "load": load}))
        return 0
    print(f"{'':<44} {'peak RSS growth':>16} {'CPU':>8} {'wall':>8}")
    print(f"{'baseline: bare reader of the pipe, 1 MiB reads':<44} {mib(base['growth']):>16}")
    for i, r in enumerate(runs, 1):
        print(f"{f'daemon, run {i} (VmHWM - VmRSS before)':<44} {mib(r['growth']):>16} {r['cpu']:>7.2f}s "
              f"{r['wall']:>7.2f}s   (sampled every 50 ms: {mib(r['sampled_peak'])}; spill file "
              f"{r['spilled']:,} bytes{'' if r['reset'] else '; VmHWM not reset'})")
    print(f"load average now {os.getloadavg()[0]:.2f}")
    if stray:
        print(f"left behind: {', '.join(stray)}")
    verdict = "PASS" if worst < TARGET else "FAIL"
    print(f"live daemon memory growth for a {mib(line)} accepted output: {mib(worst)} (worst of {len(runs)}; "
          f"{worst / line:.3f}x the line; bare reader {mib(base['growth'])}; target < 20 MiB): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
