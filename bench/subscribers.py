"""Event subscribers at 10k events/s: does every subscriber get every event, and what does each cost?

    .venv/bin/python bench/subscribers.py [--sessions 10] [--rate 10000] [--seconds 10]
                                          [--subscribers 0,1,4] [--keep]

One daemon (`loopwarden serve` in a temporary LOOPWARDEN_HOME). For each count of
subscribers K (default 0, 1, then 4), K clients connect on real unix sockets and
`subscribe` with events (as the console and `loopwarden logs -f` do), each in its
own process reading as fast as it can (recv into a large buffer, counting lines,
parsing none: the daemon's cost is measured, not the reader's). Then SESSIONS
agents (tests/agents/paced_flood.py) write RATE events per second in total for
SECONDS, and end. Once every session has ended and its records are stored:

* events produced: the rows of `events` stored for these sessions (each is
  broadcast as one `event` or `log` message);
* per subscriber: event messages received / produced, and the skips the daemon
  reported (`skipped` messages) and whether it was cut;
* the daemon's CPU time (psutil cpu_times, user + system, all threads) from the
  first launch until every session ended, per event produced, and the extra per
  event and subscriber over the run without subscribers (the baseline, same run).

PASS when every subscriber got every event and the agents wrote at least 90 %
of RATE (on an overloaded machine they fall short). Prints the load average with each
run. The script always exits 0.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import AGENTS, FINAL, PY, BenchDaemon, leftovers, verdict_line, wait_for


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def reader(sock_path: str, ready: Any, stop: Any, out: Any) -> None:
    """A subscriber in its own process: subscribe to everything with events, count what arrives."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sock_path)
    sock.sendall(orjson.dumps({"id": 1, "op": "subscribe", "events": True, "client": "bench"}) + b"\n")
    buf = bytearray(4 << 20)
    view = memoryview(buf)
    tail = b""
    first = True
    events = skipped = 0
    cut = None
    sock.settimeout(0.2)
    ready.set()
    while True:
        try:
            n = sock.recv_into(view)
        except TimeoutError:
            if stop.is_set():
                break
            continue
        if not n:
            break
        chunk = tail + bytes(view[:n])
        end = chunk.rfind(b"\n") + 1
        lines, tail = chunk[:end], chunk[end:]
        if first and lines:  # the reply to `subscribe`: the sessions as they are
            lines = lines[lines.find(b"\n") + 1:]
            first = False
        events += lines.count(b'{"kind":"event"') + lines.count(b'{"kind":"log"')
        if b'{"kind":"skipped"' in lines or b'{"kind":"cut"' in lines:
            for line in lines.splitlines():
                if line.startswith(b'{"kind":"skipped"'):
                    skipped += orjson.loads(line)["count"]
                elif line.startswith(b'{"kind":"cut"'):
                    cut = orjson.loads(line)["reason"]
    sock.close()
    out.put({"events": events, "skipped": skipped, "cut": cut})


def client_reader(home: str, ready: Any, stop: Any, out: Any) -> None:
    """A subscriber as the console and `loopwarden logs -f` are: the real client, each line parsed."""
    from loopwarden.paths import default_paths
    from loopwarden.runtime.client import Client

    client = Client.connect(default_paths({**os.environ, "LOOPWARDEN_HOME": home}), autostart=False, name="bench")
    counts = {"events": 0, "skipped": 0}
    cut = None
    _first, updates = client.subscribe(events=True)
    ready.set()

    def closer() -> None:  # once told the run is over: hang up when nothing more came for a second
        stop.wait()
        last = -1
        while counts["events"] != last:
            last = counts["events"]
            time.sleep(1.0)
        client.close()

    threading.Thread(target=closer, daemon=True).start()
    try:
        for message in updates:
            kind = message.get("kind")
            if kind in ("event", "log"):
                counts["events"] += 1
            elif kind == "skipped":
                counts["skipped"] += message["count"]
            elif kind == "cut":
                cut = message["reason"]
    except (OSError, ValueError):
        pass
    events, skipped = counts["events"], counts["skipped"]
    client.close()
    out.put({"events": events, "skipped": skipped, "cut": cut})


def one_run(d: BenchDaemon, k: int, args: argparse.Namespace, label: str) -> dict[str, Any]:
    assert d.ps is not None
    ctx = mp.get_context("fork")
    stop, out = ctx.Event(), ctx.Queue()
    readers = []
    for _ in range(k):
        ready = ctx.Event()
        if args.reader == "raw":
            p = ctx.Process(target=reader, args=(str(d.paths.socket), ready, stop, out), daemon=True)
        else:
            p = ctx.Process(target=client_reader, args=(str(d.home), ready, stop, out), daemon=True)
        p.start()
        ready.wait(20)
        readers.append(p)
    wait_for(lambda: d.request("ping")["subscribers"] == k, 20, f"{k} subscribers")
    per = args.rate / args.sessions
    command = [PY, str(AGENTS / "paced_flood.py"), "--rate", f"{per:g}", "--seconds", f"{args.seconds:g}"]
    c0, t0 = cpu(d.ps), time.monotonic()
    sids = [d.run(command, name=f"{label}{i}") for i in range(args.sessions)]
    wanted = set(sids)

    def ended() -> bool:
        snaps = [s for s in d.request("list") if s["id"] in wanted]
        for s in snaps:
            if s.get("pid"):
                d.session_pids.add(int(s["pid"]))
        return len(snaps) == len(sids) and all(s.get("state") in FINAL for s in snaps)

    wait_for(ended, args.seconds + 120, f"{len(sids)} sessions to end", interval=0.25)
    c1, t1 = cpu(d.ps), time.monotonic()
    load = os.getloadavg()[0]
    d.request("logs", session=sids[0], limit=1)  # flushes what is pending to the store
    with d.db() as db:
        marks = ",".join("?" * len(sids))
        produced = db.execute(f"SELECT count(*) FROM events WHERE session_id IN ({marks})", sids).fetchone()[0]
    time.sleep(1.0)  # the last messages reach the readers
    stop.set()
    got = [out.get(timeout=30) for _ in readers]
    for p in readers:
        p.join(10)
    wait_for(lambda: d.request("ping")["subscribers"] == 0, 20, "the subscribers to leave")
    return {"k": k, "produced": produced, "got": got, "cpu": c1 - c0, "wall": t1 - t0, "load": load,
            "rate": produced / max(t1 - t0, 1e-9)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--rate", type=float, default=10_000.0, help="events per second, all sessions together")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--subscribers", default="0,1,4", help="subscriber counts, one run each (default 0,1,4)")
    ap.add_argument("--reader", choices=("client", "raw"), default="client",
                    help="client: the real client, each line parsed (as the console and logs -f); raw: recv and "
                         "count newlines only")
    ap.add_argument("--daemon-python", default=PY,
                    help="the interpreter whose loopwarden serves (another checkout's venv: its before figures)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary LOOPWARDEN_HOME")
    args = ap.parse_args()
    counts = [int(x) for x in args.subscribers.split(",")]
    runs: list[dict[str, Any]] = []
    with BenchDaemon("subs", keep=args.keep, serve=[args.daemon_python, "-m", "loopwarden", "serve"]) as d:
        try:
            for i, k in enumerate(counts):
                r = one_run(d, k, args, f"r{i}s")
                runs.append(r)
                produced = max(r["produced"], 1)
                share = ", ".join(f"{g['events']:,}/{r['produced']:,} ({100 * g['events'] / produced:.1f} %"
                                  f"{', skipped ' + format(g['skipped'], ',') if g['skipped'] else ''}"
                                  f"{', CUT' if g['cut'] else ''})" for g in r["got"])
                print(f"{k} subscribers: {r['produced']:,} events in {r['wall']:.1f} s ({r['rate']:,.0f}/s); "
                      f"daemon CPU {r['cpu']:.2f} s = {1e6 * r['cpu'] / produced:.1f} us/event; load {r['load']:.2f}"
                      + (f"; received: {share}" if share else ""), flush=True)
        finally:
            d.close()
        left = leftovers(d)
    base = next((r for r in runs if r["k"] == 0), None)
    for r in runs:
        if r["k"] and base is not None:
            per_event = 1e6 * r["cpu"] / max(r["produced"], 1)
            base_event = 1e6 * base["cpu"] / max(base["produced"], 1)
            print(f"{r['k']} subscribers vs none: {per_event:.1f} vs {base_event:.1f} us/event "
                  f"(x{per_event / base_event:.2f}; +{(per_event - base_event) / r['k']:.1f} us per event and "
                  "subscriber)")
    for r in runs:
        if r["k"]:
            every = all(g["events"] == r["produced"] and not g["cut"] for g in r["got"])
            worst = min(g["events"] for g in r["got"])
            at_rate = r["rate"] >= 0.9 * args.rate  # an overloaded machine's agents fall short: not the target
            print(verdict_line(every and at_rate, f"{r['k']} subscribers at {r['rate']:,.0f} events/s: each received "
                                                  f"every event (worst {worst:,} of {r['produced']:,}); load "
                                                  f"{r['load']:.2f}" + ("" if at_rate else
                                                                        f"; short of {args.rate:,.0f}/s")))
    print(verdict_line(not left, f"no leftover processes{': ' + ', '.join(left) if left else ''}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
