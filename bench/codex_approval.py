"""Codex launched by loopwarden: what each approval costs, and what a looping run looks like.

    .venv/bin/python bench/codex_approval.py [-n 60] [--runs 3]

Needs the real Codex CLI (`openai-codex-cli-bin`, the `test` extra) and runs it offline on the test
suite's fake Responses API, with a temporary CODEX_HOME.

1. Approval round trip: a model that runs `echo i` n times (never the same call, so nothing is
   declined), under loopwarden (`run --adapter codex`, every command asked about), with
   bench/codex_tap.py between the daemon and the app-server timing every requestApproval until
   loopwarden's answer (p50, p99, max); beside it the same tap in front of the bare app-server, this
   script answering each request as soon as it reads it (the floor: pipes and JSON). Target: p99 < 5 ms.
2. Per command, end to end: the median time between two model requests in the same run under
   loopwarden without the tap, against the same app-server driven directly by this script with
   approvals off (`approvalPolicy: never`), and with approvals on answered at once in-process.
3. Loops, default settings: the same `echo` forever; the same failing `cat`; and with a one-model
   escalation ladder where the model's server fails the first turn (HTTP 500), the gate that follows
   (expiring after 3 s: deny). For each: calls before the first decline, at the gate, and the end.
"""

from __future__ import annotations

import argparse
import itertools
import json
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
from loopwarden.sessions.codex_app import find_binary
from tests.codex.codex_home import codex_env, write_codex_home
from tests.codex.fake_responses import FakeResponses, Reply, calls_made, http_error, run, say

TAP = Path(__file__).resolve().parent / "codex_tap.py"
TARGET_P99_MS = 5.0


def echo_script(n: int, times: list[float]) -> Callable[[dict[str, Any]], Reply]:
    def script(body: dict[str, Any]) -> Reply:
        times.append(time.perf_counter())
        i = calls_made(body)
        return run(f"echo {i}") if i < n else say("done")
    return script


def gaps(times: list[float]) -> list[float]:
    return [(b - a) * 1000 for a, b in itertools.pairwise(times)]


def supervised(daemon: BenchDaemon, fake: FakeResponses, binary: str, prompt: str, *,
               sets: tuple[str, ...] = (), tap_log: str | None = None) -> tuple[str, dict[str, Any]]:
    """One `run --adapter codex` session (through the tap when tap_log is set); its final status."""
    work = tempfile.mkdtemp(prefix="lw-codex-work-")
    home = write_codex_home(Path(tempfile.mkdtemp(prefix="lw-codex-home-")), fake.url)
    env = codex_env(home)
    command = [binary, prompt]
    if tap_log:
        wrapper = Path(work) / "codex"
        wrapper.write_text(f'#!/bin/sh\nexec {PY} {TAP} "$@"\n')
        wrapper.chmod(0o755)
        env.update({"TAP_REAL": binary, "TAP_LOG": tap_log})
        command = [str(wrapper), prompt]
    spec = {"command": command, "adapter": "codex", "sets": list(sets), "name": "bench", "cwd": work, "env": env}
    sid = daemon.request("run", spec=spec)["id"]
    return sid, daemon.wait_final([sid], 120, interval=1.0)[sid]  # rare polls: the daemon serves the session


def bare(fake: FakeResponses, binary: str, prompt: str, policy: str, tap_log: str | None = None) -> None:
    """The same app-server with nothing supervising it: this script starts one turn and, with approvals
    on, answers `accept` as soon as it reads each request (through the tap when tap_log is set)."""
    work = tempfile.mkdtemp(prefix="lw-codex-work-")
    home = write_codex_home(Path(tempfile.mkdtemp(prefix="lw-codex-home-")), fake.url)
    env = codex_env(home)
    command = [binary, "app-server"]
    if tap_log:
        env.update({"TAP_REAL": binary, "TAP_LOG": tap_log})
        command = [PY, str(TAP), "app-server"]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=work)
    assert proc.stdin and proc.stdout

    def send(obj: dict[str, Any]) -> None:
        proc.stdin.write(json.dumps(obj).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "bench", "title": "bench",
                                                                     "version": "1"}, "capabilities": {}}})
    send({"method": "initialized"})
    send({"id": 2, "method": "thread/start", "params": {"approvalPolicy": policy}})
    for line in proc.stdout:
        msg = json.loads(line)
        if msg.get("id") == 2 and "result" in msg:
            send({"id": 3, "method": "turn/start", "params": {"threadId": msg["result"]["thread"]["id"],
                                                              "input": [{"type": "text", "text": prompt,
                                                                         "text_elements": []}]}})
        elif str(msg.get("method", "")).endswith("/requestApproval"):
            send({"id": msg["id"], "result": {"decision": "accept"}})
        elif msg.get("method") == "turn/completed":
            break
    proc.stdin.close()
    proc.wait(30)


def latency(daemon: BenchDaemon, binary: str, n: int, runs: int) -> None:
    rtts: list[float] = []
    floor: list[float] = []
    with_lw: list[float] = []
    off: list[float] = []
    on: list[float] = []
    for run_no in range(runs):
        times: list[float] = []  # through the tap, for the round trips (the tap's relay costs time)
        fake = FakeResponses(max_replies=n + 10).play(echo_script(n, times)).start()
        log = tempfile.mktemp(prefix="lw-codex-rtt-")
        _, snap = supervised(daemon, fake, binary, "count", tap_log=log)
        fake.stop()
        assert snap["state"] == "exited" and snap["exit_code"] == 0, snap
        got = json.loads(Path(log).read_text())
        rtts += got
        slow = sorted(range(len(got)), key=lambda i: -got[i])[:4]
        print(f"   run: slowest approvals #{', #'.join(str(i + 1) for i in slow)}: "
              f"{', '.join(f'{got[i]:.2f}' for i in slow)} ms", file=sys.stderr)
        fake = FakeResponses(max_replies=n + 10).play(echo_script(n, [])).start()
        log = tempfile.mktemp(prefix="lw-codex-rtt-")
        bare(fake, binary, "count", "untrusted", tap_log=log)
        fake.stop()
        floor += json.loads(Path(log).read_text())
        variants = [(with_lw, None), (off, "never"), (on, "untrusted")]
        medians = []
        for target, how in variants[run_no % 3:] + variants[:run_no % 3]:  # rotated: the machine's load drifts
            times = []
            fake = FakeResponses(max_replies=n + 10).play(echo_script(n, times)).start()
            if how is None:
                _, snap = supervised(daemon, fake, binary, "count")
                assert snap["state"] == "exited" and snap["exit_code"] == 0, snap
            else:
                bare(fake, binary, "count", how)
            fake.stop()
            target += gaps(times[1:])  # the first gap includes the thread's start
            medians.append(f"{how or 'loopwarden'} {statistics.median(gaps(times[1:])):.1f}")
        print(f"   run: median gap {', '.join(medians)} ms", file=sys.stderr)
    p99 = pct(rtts, 0.99)
    print(f"1. approval round trip (requestApproval forwarded -> answer read), {len(rtts)} approvals: "
          f"p50 {pct(rtts, 0.5):.2f} ms, p99 {p99:.2f} ms, max {max(rtts):.2f} ms")
    print(f"   baseline, the same tap with this script answering at once: p50 {pct(floor, 0.5):.2f} ms, "
          f"p99 {pct(floor, 0.99):.2f} ms; ratio p50 {pct(rtts, 0.5) / pct(floor, 0.5):.1f}x, "
          f"p99 {p99 / pct(floor, 0.99):.1f}x")
    print(f"   {'PASS' if p99 < TARGET_P99_MS else 'FAIL'}: p99 {p99:.2f} ms < {TARGET_P99_MS:.0f} ms")
    a, b, c = statistics.median(with_lw), statistics.median(off), statistics.median(on)
    print(f"2. time between model requests, median: {a:.1f} ms under loopwarden (approvals on), {b:.1f} ms bare "
          f"with approvals off, {c:.1f} ms bare with approvals answered at once ({len(with_lw)}, {len(off)}, "
          f"{len(on)} gaps): ratio {a / b:.2f} vs approvals off, {a / c:.2f} vs an instant answer; "
          f"added per command ~{a - b:.1f} ms")


def loop(daemon: BenchDaemon, binary: str, label: str, script: Callable[[dict[str, Any]], Reply],
         sets: tuple[str, ...] = ()) -> None:
    fake = FakeResponses(max_replies=60).play(script).start()
    started = time.monotonic()
    sid, snap = supervised(daemon, fake, binary, "do the thing", sets=sets)
    fake.stop()
    records = daemon.request("logs", session=sid)
    seqs = [e["seq"] for e in records["events"] if e["kind"] == "tool_call"]

    def calls_at(seq: int) -> int:
        return sum(1 for s in seqs if s <= seq)

    verdicts = records["verdicts"]
    first = {a: next((v for v in verdicts if v["action"] == a), None) for a in ("nudge", "block", "gate")}
    gate = first["gate"] or next((v for v in verdicts if v["action"] == "escalate" and v.get("target") == "human"),
                                 None)
    parts = [f"{label}: {len(seqs)} calls"]
    if first["nudge"]:
        parts.append(f"nudge after call {calls_at(first['nudge']['seq'])}")
    if first["block"]:
        at = calls_at(first["block"]["seq"])
        parts.append(f"first decline at call {at} (ran before it: {at - 1})")
    if gate:
        parts.append(f"gate after call {calls_at(gate['seq'])} ({gate['rule']})")
    parts.append(f"end: {snap['state']}({snap.get('termination') or snap.get('exit_code')}) at call {len(seqs)}, "
                 f"{time.monotonic() - started:.1f} s")
    print("3. " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=60, help="commands per latency run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-only", action="store_true", help="skip the loops (part 3)")
    opts = parser.parse_args()
    binary = find_binary()
    if not binary:
        print("SKIP: no codex binary (pip install openai-codex-cli-bin, or set LOOPWARDEN_CODEX)")
        return
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"{version}, {opts.runs} runs of {opts.n} commands")
    with BenchDaemon("codex") as daemon:
        latency(daemon, binary, opts.n, opts.runs)
        if opts.latency_only:
            return
        loop(daemon, binary, "same `echo` forever", lambda body: run("echo looping"))
        loop(daemon, binary, "same failing `cat`", lambda body: run("cat missing.txt"))
        state = {"n": 0}

        def failing_first(body: dict[str, Any]) -> Reply:
            state["n"] += 1
            return http_error(500) if state["n"] == 1 else run("echo looping")

        gate = ("escalation.models=gpt-5.5", "escalation.failures_at_top=1", "gates.timeout=3s")
        loop(daemon, binary, "`echo` forever after a failed first turn, one-model ladder (gate expires after "
             "3 s: deny)", failing_first, gate)


if __name__ == "__main__":
    main()
