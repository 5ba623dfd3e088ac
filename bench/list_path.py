"""One `list` request at N live sessions, in-process: the daemon's cost from the request line to the reply written.

    .venv/bin/python bench/list_path.py [-n 200] [-k 200] [--runs 5]            # this thread's CPU, best of RUNS
    valgrind --tool=callgrind --instr-atstart=no --trace-children=no --callgrind-out-file=/tmp/lp.%p \\
        .venv/bin/python bench/list_path.py -n 200 -k 50 --runs 1 --callgrind
        # `summary:` of /tmp/lp.PID.1 (K lists) and /tmp/lp.PID.2 (K pings): (1 - 2) / K per list
    cd /tmp && PYTHONPATH=/tmp/list-before /work/wt-list/.venv/bin/python /work/wt-list/bench/list_path.py
        # another checkout (`python FILE` puts the script's folder first on sys.path, never the checkout)

N native live sessions (`LiveSession`, the default configuration) of a real `Daemon` (not serving: its
registry, record routing and recorder over a real store in a temporary home), each RUNNING with a made-up
pid, its hello read through stdout's reader (as `list_latency.py`'s quiet agents) and sampled resources set;
their publishes are taken once (`Router.publish_dirty`), so every snapshot is in its steady state: unchanged
since the last list, as at 200 quiet agents. Then K `list` requests and K `ping` requests go through the daemon's
real request path (`SocketServer.connection` on an accepted unix socket: the line read, parsed, dispatched,
the reply built, encoded and written) from a client on the same event loop that reads each reply's line
whole; each kind in its own block, RUNS times, interleaved. Prints this thread's CPU per request (best of
RUNS; the client's recv is in both, so list - ping is the daemon's cost of the list above a trivial request),
and `op_list` + the reply's encoding alone (no socket). With --callgrind, one block of K lists and one of K
pings are each dumped (instrumentation on around them only). Informative; always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from flood_path import read_stdout

from loopwarden.paths import Paths
from loopwarden.runtime import server
from loopwarden.runtime.client import Client
from loopwarden.runtime.daemon import Daemon
from loopwarden.runtime.session import LiveSession, Resources, SessionSpec
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.verdicts import SessionState

HELLO = b'{"type":"hello","name":"quiet","protocol":1,"handshake":false}\n'


def sessions(daemon: Daemon, n: int) -> None:
    """N running native sessions, each having said hello, with sampled resources; their publishes taken."""
    config = load_config(env={})
    native = adapters()["native"]
    router: Any = getattr(daemon, "router", daemon)  # (older checkouts: the daemon's mixins held it all)
    sessions_of: Any = getattr(daemon, "registry", daemon)
    lines_to = ({"sink_rows": router.sink_rows} if hasattr(router, "sink_rows")  # (older checkouts: sink_line)
                else {"sink_line": router.sink_line} if hasattr(router, "sink_line") else {})
    now = time.time()
    for i in range(n):
        sid = f"s{i + 1}"
        session = LiveSession(SessionSpec(id=sid, name=f"quiet{i}", command=[sys.executable, "-c", "quiet"],
                                          env={"PATH": "/usr/bin:/bin"}), config, native(),
                              sink=router.sink, records=daemon.recorder, **lines_to)
        session.pid, session.state, session.started_at = 10_000 + i, SessionState.RUNNING, now
        sessions_of.sessions[sid] = session
        read_stdout(session).data_received(HELLO)
        session.resources = Resources(0.0, 9_000_000 + 4096 * i, 1, 4, [])
        timer = session.journal.progress_timer if hasattr(session, "journal") else session._progress_timer
        if timer is not None:
            timer.cancel()
    if hasattr(router, "publish_dirty"):
        router.publish_dirty()
    else:
        router._publish_dirty()


def _callgrind(*args: str) -> None:
    """callgrind_control on this process; valgrind answers only while this process runs code, so spin."""
    control = subprocess.Popen(["callgrind_control", *args, str(os.getpid())], stdout=subprocess.DEVNULL)
    while control.poll() is None:
        pass


def _client(path: str, loop_thread: int, k: int, runs: int, callgrind: bool) -> dict[str, float]:
    """The real client (`Client`: sendall, then the reply's line read from its file) in this thread; the event
    loop's thread CPU per request, each kind in its own block of K, best of RUNS."""
    client = Client(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), "bench")
    client.sock.connect(path)
    clock = time.pthread_getcpuclockid(loop_thread)
    sizes = {op: len(ask(client, 0, op)) for op in ("list", "ping")}
    if callgrind:
        for op in ("list", "ping"):
            _callgrind("-i", "on")
            for i in range(k):
                ask(client, i, op)
            _callgrind("-d")
            _callgrind("-i", "off")
    best: dict[str, float] = {"size": sizes["list"]}
    for _ in range(runs):
        for op in ("list", "ping"):
            t0 = time.clock_gettime(clock)
            for i in range(k):
                ask(client, i, op)
            best[op] = min(best.get(op, 1e9), (time.clock_gettime(clock) - t0) / k)
    client.sock.close()
    return best


def ask(client: Client, i: int, op: str) -> bytes:
    client.sock.sendall(b'{"id":%d,"op":"%s","client":"bench"}\n' % (i, op.encode()))
    line = client.file.readline()
    assert line.endswith(b"\n"), line[:200]
    return line


async def measure(home: Path, n: int, k: int, runs: int, callgrind: bool) -> None:
    daemon = Daemon(Paths(runtime=home / "run", data=home / "data", cache=home / "cache"))
    (home / "data").mkdir(parents=True, exist_ok=True)
    recorder = daemon.recorder
    assert recorder.open(), recorder.health.last_error
    sessions(daemon, n)
    path = str(home / "s")
    listener = await anyio.create_unix_listener(path)
    served: Any = getattr(daemon, "server", None)  # (older checkouts: the daemon's mixins held it all)
    connection = served.connection if served is not None else daemon._connection
    op_list = served.handlers["list"] if served is not None else daemon.op_list
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, connection)
        best = await anyio.to_thread.run_sync(_client, path, threading.get_ident(), k, runs, callgrind)
        for _ in range(runs):
            t0 = time.thread_time()
            for i in range(k):
                server._reply(i, result=await op_list({"op": "list"}))
            best["op_list"] = min(best.get("op_list", 1e9), (time.thread_time() - t0) / k)
            t0 = time.thread_time()
            for _ in range(k):
                await op_list({"op": "list"})
            best["snapshots"] = min(best.get("snapshots", 1e9), (time.thread_time() - t0) / k)
        tg.cancel_scope.cancel()
    await listener.aclose()
    recorder.close()
    import loopwarden
    print(f"{n} sessions, reply {best['size']:,.0f} bytes, {k} requests x {runs} runs (best): list "
          f"{1e3 * best['list']:.3f} ms, ping {1e3 * best['ping']:.3f} ms, list - ping "
          f"{1e3 * (best['list'] - best['ping']):.3f} ms (the event loop's thread CPU); op_list + reply encoded "
          f"{1e3 * best['op_list']:.3f} ms (of it the snapshots {1e3 * best['snapshots']:.3f} ms); "
          f"load {os.getloadavg()[0]:.2f}; {Path(loopwarden.__file__).parent}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200, help="live sessions")
    ap.add_argument("-k", type=int, default=200, help="requests of each kind per block")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--callgrind", action="store_true", help="dump one block of K lists, then one of K pings")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="list-path-") as tmp:
        asyncio.run(measure(Path(tmp), args.n, args.k, args.runs, args.callgrind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
