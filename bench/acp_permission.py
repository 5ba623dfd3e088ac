"""An ACP agent launched by loopwarden: what each permission round trip costs.

    .venv/bin/python bench/acp_permission.py [-n 200] [--runs 3]

The fake ACP agent (tests/agents/fake_acp_agent.py, mode `count`) asks `session/request_permission`
n times, never for the same call, and times each request from its write to the answer's read. Under
loopwarden (`run --adapter acp`, through a real daemon) that is the supervised round trip: the daemon
reads the request, stores the event, judges it and writes `allow_once`. Beside it, in the same run,
the same agent driven by this script, which answers each request as soon as it reads it (the floor:
pipes and JSON). The difference is what loopwarden adds per permission. Target: p99 < 5 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import PY, ROOT, BenchDaemon, pct

FAKE = str(ROOT / "tests" / "agents" / "fake_acp_agent.py")
TARGET_P99_MS = 5.0


def supervised(daemon: BenchDaemon, n: int) -> list[float]:
    """One `run --adapter acp` session of n permission requests; the agent's round trips (ms)."""
    work = tempfile.mkdtemp(prefix="lw-acp-work-")
    times = Path(work) / "times.json"
    env = {**os.environ, "FAKE_ACP_CALLS": str(n), "FAKE_ACP_TIMES": str(times)}
    spec = {"command": [PY, FAKE, "count", "--", "count"], "adapter": "acp", "name": "bench", "cwd": work,
            "env": env, "sets": []}
    sid = daemon.request("run", spec=spec)["id"]
    snap = daemon.wait_final([sid], 120, interval=0.5)[sid]
    assert snap["state"] == "exited" and snap["exit_code"] == 0, snap
    return list(json.loads(times.read_text()))


def bare(n: int) -> list[float]:
    """The same agent driven by this script, answering each request the moment it is read."""
    work = tempfile.mkdtemp(prefix="lw-acp-work-")
    times = Path(work) / "times.json"
    env = {**os.environ, "FAKE_ACP_CALLS": str(n), "FAKE_ACP_TIMES": str(times)}
    proc = subprocess.Popen([PY, FAKE, "count"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=work)
    assert proc.stdin and proc.stdout

    def send(obj: dict[str, Any]) -> None:
        proc.stdin.write(json.dumps(obj).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("id") == 1 and "result" in msg:
            send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": work, "mcpServers": []}})
        elif msg.get("id") == 2 and "result" in msg:
            send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                  "params": {"sessionId": msg["result"]["sessionId"], "prompt": [{"type": "text", "text": "go"}]}})
        elif msg.get("method") == "session/request_permission":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": {"outcome": "selected",
                                                                             "optionId": "yes"}}})
        elif msg.get("id") == 3:
            break
    proc.stdin.close()
    proc.wait(30)
    return list(json.loads(times.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=200, help="permission requests per run")
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"{opts.runs} runs of {opts.n} permission requests, load {load:.1f} on {os.cpu_count()} cores")
    rtts: list[float] = []
    floor: list[float] = []
    with BenchDaemon("acp") as daemon:
        for _ in range(opts.runs):
            got = supervised(daemon, opts.n)
            base = bare(opts.n)
            print(f"   run: loopwarden p50 {pct(got, 0.5):.2f} ms, p99 {pct(got, 0.99):.2f} ms; "
                  f"bare p50 {pct(base, 0.5):.2f} ms, p99 {pct(base, 0.99):.2f} ms", file=sys.stderr)
            rtts += got
            floor += base
    p50, p99 = pct(rtts, 0.5), pct(rtts, 0.99)
    print(f"permission round trip (request written -> answer read, at the agent), {len(rtts)} requests: "
          f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(rtts):.2f} ms")
    print(f"baseline, this script answering at once: p50 {pct(floor, 0.5):.2f} ms, p99 {pct(floor, 0.99):.2f} ms; "
          f"added by loopwarden: p50 {p50 - pct(floor, 0.5):.2f} ms, p99 {p99 - pct(floor, 0.99):.2f} ms")
    print(f"{'PASS' if p99 < TARGET_P99_MS else 'FAIL'}: p99 {p99:.2f} ms < {TARGET_P99_MS:.0f} ms")


if __name__ == "__main__":
    main()
