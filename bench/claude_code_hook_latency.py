"""Claude Code launched by loopwarden: what each tool call costs, and what a looping run looks like.

    .venv/bin/python bench/claude_code_hook_latency.py [-n 60] [--runs 3]

Needs the real CLI (claude-agent-sdk's bundled `claude`, the `test` extra) and runs it offline on
the test suite's fake Messages API, with a temporary HOME.

1. Hook round trip: a model that runs `echo i` n times (never the same call, so nothing is
   blocked), under loopwarden, with bench/claude_code_tap.py between the daemon and the CLI timing
   every hook_callback until loopwarden's answer (p50, p95, max).
2. Added per tool call, end to end: the median time between two model requests (the CLI's own
   work, the tool, and under loopwarden the hook) in the same run under loopwarden without the
   tap, minus the same without loopwarden (the CLI driven directly in stream-json mode, no hook).
3. Loops, default settings: the same `ls` forever; the same failing `cat`; and with a one-model
   escalation ladder and claude's --max-turns 5, the turn's end opens a gate. For each: how many
   calls ran before the first block, at the gate, and at the end, and how the session ended.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import PY, ROOT, BenchDaemon, pct

sys.path.insert(0, str(ROOT))
from loopwarden.sessions.claude_launch import FIXED_ARGS, bundled_binary, find_binary
from tests.fakes.anthropic_server import FakeAnthropic, Turn, assistant_turns, call, say

QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1"}
TAP = Path(__file__).resolve().parent / "claude_code_tap.py"


def echo_script(n: int, times: list[float]) -> Callable[[dict[str, Any]], Turn]:
    def script(body: dict[str, Any]) -> Turn:
        times.append(time.perf_counter())
        i = assistant_turns(body)
        return call("Bash", {"command": f"echo {i}", "description": f"step {i}"}) if i < n else say("done")
    return script


def gaps(times: list[float]) -> list[float]:
    return [(b - a) * 1000 for a, b in itertools.pairwise(times)]


def claude_env(fake: FakeAnthropic, home: str) -> dict[str, str]:
    return {**os.environ, **fake.env(), **QUIET, "HOME": home}


def supervised(daemon: BenchDaemon, fake: FakeAnthropic, binary: str, args: list[str], *,
               sets: tuple[str, ...] = (), tap_log: str | None = None) -> tuple[str, dict[str, Any]]:
    """One `run --adapter claude-code` session (through the tap when tap_log is set); its final status."""
    work = tempfile.mkdtemp(prefix="lw-cc-work-")
    env = claude_env(fake, tempfile.mkdtemp(prefix="lw-cc-home-"))
    command = [binary, *args]
    if tap_log:
        wrapper = Path(work) / "claude"
        wrapper.write_text(f'#!/bin/sh\nexec {PY} {TAP} "$@"\n')
        wrapper.chmod(0o755)
        env.update({"TAP_REAL": binary, "TAP_LOG": tap_log})
        command = [str(wrapper), *args]
    spec = {"command": command, "adapter": "claude-code", "sets": list(sets), "name": "bench", "cwd": work,
            "env": env}
    sid = daemon.request("run", spec=spec)["id"]
    return sid, daemon.wait_final([sid], 120)[sid]


def bare(fake: FakeAnthropic, binary: str, args: list[str], prompt: str) -> None:
    """The same CLI in the same mode with nothing supervising it: no hook, stdin closed after the result."""
    proc = subprocess.Popen([binary, *FIXED_ARGS, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=claude_env(fake, tempfile.mkdtemp(prefix="lw-cc-home-")),
                            cwd=tempfile.mkdtemp(prefix="lw-cc-work-"))
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt},
                                 "parent_tool_use_id": None, "session_id": "default"}).encode() + b"\n")
    proc.stdin.flush()
    for line in proc.stdout:
        if json.loads(line).get("type") == "result":
            break
    proc.stdin.close()
    proc.wait(30)


def latency(daemon: BenchDaemon, binary: str, n: int, runs: int) -> None:
    args = ["--max-turns", str(n + 5), "--allowedTools=Bash", "count"]
    rtts: list[float] = []
    with_lw: list[float] = []
    without: list[float] = []
    for _ in range(runs):
        times: list[float] = []  # through the tap, for the round trips (the tap's relay costs time)
        fake = FakeAnthropic(echo_script(n, times), max_turns=n + 10).start()
        log = tempfile.mktemp(prefix="lw-cc-rtt-")
        _, snap = supervised(daemon, fake, binary, args, tap_log=log)
        fake.stop()
        assert snap["state"] == "exited" and snap["exit_code"] == 0, snap
        rtts += json.loads(Path(log).read_text())
        times = []  # without the tap, for the time between requests
        fake = FakeAnthropic(echo_script(n, times), max_turns=n + 10).start()
        _, snap = supervised(daemon, fake, binary, args)
        fake.stop()
        assert snap["state"] == "exited" and snap["exit_code"] == 0, snap
        with_lw += gaps(times[1:])  # the first gap includes the CLI's start
        times = []
        fake = FakeAnthropic(echo_script(n, times), max_turns=n + 10).start()
        bare(fake, binary, args[:-1], "count")
        fake.stop()
        without += gaps(times[1:])
    print(f"1. hook_callback round trip, {len(rtts)} calls: p50 {pct(rtts, 0.5):.2f} ms, "
          f"p95 {pct(rtts, 0.95):.2f} ms, max {max(rtts):.2f} ms")
    a, b = statistics.median(with_lw), statistics.median(without)
    print(f"2. time between model requests, median: {a:.1f} ms with loopwarden, {b:.1f} ms without "
          f"({len(with_lw)} and {len(without)} gaps): added per tool call ~{a - b:.1f} ms")


def loop(daemon: BenchDaemon, binary: str, label: str, script: Callable[[dict[str, Any]], Turn],
         args: list[str], sets: tuple[str, ...] = ()) -> None:
    fake = FakeAnthropic(script, max_turns=60).start()
    started = time.monotonic()
    sid, snap = supervised(daemon, fake, binary, args, sets=sets)
    fake.stop()
    records = daemon.request("logs", session=sid)
    calls = [e for e in records["events"] if e["kind"] == "tool_call"]
    seqs = [c["seq"] for c in calls]

    def calls_at(seq: int) -> int:
        return sum(1 for s in seqs if s <= seq) if seq else len(seqs)

    verdicts = records["verdicts"]
    first = {a: next((v for v in verdicts if v["action"] == a), None) for a in ("nudge", "block", "gate")}
    gate = first["gate"] or next((v for v in verdicts if v["action"] == "escalate" and v.get("target") == "human"),
                                 None)
    parts = [f"{label}: {len(calls)} calls"]
    if first["nudge"]:
        parts.append(f"nudge after call {calls_at(first['nudge']['seq'])}")
    if first["block"]:
        parts.append(f"first block at call {calls_at(first['block']['seq'])} (ran before it: "
                     f"{calls_at(first['block']['seq']) - 1})")
    if gate:
        parts.append(f"gate after call {calls_at(gate['seq'])} ({gate['rule']})")
    parts.append(f"end: {snap['state']}({snap.get('termination') or snap.get('exit_code')}) at call {len(calls)}, "
                 f"{time.monotonic() - started:.1f} s")
    print("3. " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=60, help="tool calls per latency run")
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    binary = find_binary() or bundled_binary()
    if not binary:
        print("SKIP: no claude binary (pip install claude-agent-sdk, or set LOOPWARDEN_CLAUDE)")
        return
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"claude {version}, {opts.runs} runs of {opts.n} calls")
    with BenchDaemon("claude-code") as daemon:
        latency(daemon, binary, opts.n, opts.runs)
        ls = {"command": "ls", "description": "list"}
        loop(daemon, binary, "same `ls` forever", lambda body: call("Bash", ls),
             ["--max-turns", "40", "--allowedTools=Bash", "list"])
        cat = {"command": "cat missing.txt", "description": "read"}
        loop(daemon, binary, "same failing `cat`", lambda body: call("Bash", cat),
             ["--max-turns", "40", "--allowedTools=Bash", "read it"])
        gate = ("escalation.models=sonnet", "escalation.failures_at_top=1", "gates.timeout=3s")
        loop(daemon, binary, "`ls` forever, --max-turns 5, one-model ladder (gate expires after 3 s: deny)",
             lambda body: call("Bash", ls), ["--max-turns", "5", "--allowedTools=Bash", "list"], gate)


if __name__ == "__main__":
    main()
