"""`list` at 10 and at 200 sessions: its round trip through the real client, beside `ping`'s.

    .venv/bin/python bench/list_latency.py [--small 10] [--large 200] [-n 300] [--rounds 3] [--keep]

One daemon (`loopwarden serve` in a temporary LOOPWARDEN_HOME). First SMALL quiet
native agents (a `hello`, then sleep), then LARGE in all. At each size, once every
session runs and the daemon has settled, N `list` requests and N `ping` requests,
interleaved, each a round trip on one connection of the real client (what
`loopwarden ls` and the console do), in ROUNDS rounds: p50 and p99 of the wall
time of the best round, until the reply's line is read (answered) and until the
client has parsed it (parsed: orjson, 1.3 ms for 200 snapshots at best), and
the daemon's CPU time (psutil cpu_times, all threads) per request above its
background (measured over an idle second before each round; the sampler of 200
sessions costs more than a `list`; `ping`'s CPU shows what is left of it). `ping` is the
baseline of the same run: a trivial request through the same socket, parsing and
dispatch. Prints the load average beside each figure.

Target: `list` at LARGE (200) sessions answers in under 5 ms (p50 of
the answered time).
The script always exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import PY, BenchDaemon, leftovers, pct, verdict_line, wait_for

TARGET_MS = 5.0
QUIET = [PY, "-c", "import time; print('{\"type\":\"hello\",\"name\":\"quiet\",\"protocol\":1,\"handshake\":false}', "
         "flush=True); time.sleep(600)"]


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def grow(d: BenchDaemon, total: int, sids: list[str]) -> None:
    """Start quiet sessions until `total` run, and wait until every one has said hello."""
    while len(sids) < total:
        sids.append(d.run(QUIET, name=f"quiet{len(sids)}"))
    wanted = set(sids)

    def running() -> bool:
        snaps = [s for s in d.request("list") if s["id"] in wanted]
        for s in snaps:
            if s.get("pid"):
                d.session_pids.add(int(s["pid"]))
            if s.get("state") not in ("running", "starting"):
                raise RuntimeError(f"session {s['id']} is {s.get('state')}")
        return len(snaps) == total and all(s.get("state") == "running" and s.get("events") for s in snaps)

    wait_for(running, 180, f"{total} quiet sessions to run", interval=0.5)
    time.sleep(2.0)  # the launch's publishing and sampling settle


def measure(d: BenchDaemon, n: int, rounds: int) -> dict[str, Any]:
    """ROUNDS x (N `list` and N `ping` round trips, interleaved), the best round's p50/p99 of each; and the
    daemon's CPU per request above its background (its CPU over an idle second before each round: at 200
    sessions the sampler alone costs more than a `list` now)."""
    assert d.ps is not None
    client = d.client()
    best: dict[str, Any] = {}
    # the real client's socket and reader, its request line; the parse of the reply is timed apart
    for _ in range(rounds):
        c0, t0 = cpu(d.ps), time.perf_counter()
        time.sleep(1.0)
        background = (cpu(d.ps) - c0) / (time.perf_counter() - t0)  # CPU seconds per second, no request
        walls: dict[str, list[float]] = {"list": [], "ping": [], "list_answer": [], "ping_answer": []}
        cpus: dict[str, float] = {"list": 0.0, "ping": 0.0}
        size = 0
        for i in range(n):
            for op in ("list", "ping") if i % 2 == 0 else ("ping", "list"):
                c0 = cpu(d.ps)
                t0 = time.perf_counter()
                client.sock.sendall(orjson.dumps({"id": i, "op": op, "client": client.name}) + b"\n")
                line = client.file.readline()  # the real client's reader; its parse is timed apart
                answered = time.perf_counter()
                result = orjson.loads(line)["result"]
                parsed = time.perf_counter()
                walls[op].append(parsed - t0)
                walls[f"{op}_answer"].append(answered - t0)
                cpus[op] += cpu(d.ps) - c0 - background * (parsed - t0)
                if op == "list":
                    size = len(result)
        m = {"sessions": size, "load": os.getloadavg()[0], "background": 100 * background,
             **{f"{op}_{k}": v for op in walls for k, v in (
                 ("p50", 1000 * pct(walls[op], 0.5)), ("p99", 1000 * pct(walls[op], 0.99)),
                 ("cpu", 1000 * max(0.0, cpus.get(op, 0.0)) / n))}}
        if not best or m["list_p50"] < best["list_p50"]:
            best = m
    return best


def row(label: str, m: dict[str, Any]) -> str:
    return (f"{label:>5} sessions ({m['sessions']} listed): list answered p50 {m['list_answer_p50']:6.2f} ms "
            f"p99 {m['list_answer_p99']:6.2f}, parsed p50 {m['list_p50']:6.2f} p99 {m['list_p99']:6.2f}; "
            f"daemon CPU {m['list_cpu']:5.2f} ms/req | ping answered p50 {m['ping_answer_p50']:5.2f} ms "
            f"p99 {m['ping_answer_p99']:5.2f}, CPU {m['ping_cpu']:4.2f} ms/req | daemon background "
            f"{m['background']:.1f} % of a core | load {m['load']:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=10)
    ap.add_argument("--large", type=int, default=200)
    ap.add_argument("-n", type=int, default=300, help="requests of each kind at each size (default 300)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds at each size; the best round's figures")
    ap.add_argument("--daemon-python", default=PY,
                    help="the interpreter whose loopwarden serves (another checkout's venv: its before figures)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary LOOPWARDEN_HOME")
    args = ap.parse_args()
    results: dict[int, dict[str, Any]] = {}
    with BenchDaemon("list", keep=args.keep, serve=[args.daemon_python, "-m", "loopwarden", "serve"]) as d:
        try:
            sids: list[str] = []
            for total in (args.small, args.large):
                grow(d, total, sids)
                results[total] = measure(d, args.n, args.rounds)
                print(row(str(total), results[total]), flush=True)
        finally:
            d.close()
        left = leftovers(d)
    large, small = results[args.large], results[args.small]
    ratio_small = large["list_answer_p50"] / small["list_answer_p50"]
    ratio_ping = large["list_answer_p50"] / large["ping_answer_p50"]
    print(f"list at {args.large} vs {args.small} sessions: answered p50 x{ratio_small:.1f}; list at {args.large} vs "
          f"ping: answered p50 x{ratio_ping:.1f}, daemon CPU {large['list_cpu'] - large['ping_cpu']:+.2f} ms/req")
    print(verdict_line(large["list_answer_p50"] < TARGET_MS,
                       f"list at {args.large} sessions answered: p50 {large['list_answer_p50']:.2f} ms (p99 "
                       f"{large['list_answer_p99']:.2f}; parsed by the client p50 {large['list_p50']:.2f}) < "
                       f"{TARGET_MS:g} ms; ping baseline p50 {large['ping_answer_p50']:.2f} ms; "
                       f"load {large['load']:.2f}"))
    print(verdict_line(not left, f"no leftover processes{': ' + ', '.join(left) if left else ''}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
