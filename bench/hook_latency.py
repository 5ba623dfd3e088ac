"""What `loopwarden hook claude-code` adds to each Claude Code tool call.

    .venv/bin/python bench/hook_latency.py [-n 200]

Claude Code runs a command hook as `sh -c COMMAND` with the event JSON on stdin, and waits for it to
exit. This runs the same thing, n times each, and times it from spawn to exit:

  (a) `sh -c true`: the floor of any command hook (a shell and a process);
  (b) `sh -c 'PYTHON -c pass'`: the Python interpreter starting and stopping;
  (c) the hook on a PreToolUse, and on a PostToolUse, with a daemon running (each call has other
      arguments, so nothing is blocked; the judged path is the same);
  (d) the hook with no daemon (the fail-open path);
  (e) the hook through the full command line (click and every command module), the path
      `loopwarden.entry` skips;
  (f) in this process: connect + request + answer only, without any process start.

A tool call runs two hooks (PreToolUse and PostToolUse); "added per tool call" is 2 x (c) - 2 x (a)
against a Claude Code with no hooks at all.

With --claude, also (g): the real Claude Code CLI (from claude-agent-sdk) on the fake Messages API
of the test suite, making 10 different Bash calls, with and without `loopwarden hook install`:
the difference in wall-clock time, per tool call (the run's 4 other hook runs included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import PY, BenchDaemon, pct

from loopwarden.hook_client import decide

SCRIPT = Path(PY).parent / "loopwarden"


def event(name: str, i: int) -> dict[str, object]:
    out: dict[str, object] = {"session_id": "bench", "cwd": "/tmp/bench", "transcript_path": "/tmp/bench.jsonl",
                              "permission_mode": "default", "hook_event_name": name, "tool_name": "Bash",
                              "tool_input": {"command": f"ls {i}"}, "tool_use_id": f"toolu_{i}"}
    if name == "PostToolUse":
        out["tool_response"] = {"stdout": "a.txt\nb.txt", "stderr": "", "interrupted": False, "isImage": False}
    return out


def timed(command: str, env: dict[str, str], n: int, name: str = "PreToolUse") -> tuple[list[float], float]:
    """Milliseconds per `sh -c command` run (the hook event on stdin), and the mean CPU milliseconds
    (user + system) the runs used: less disturbed than wall time on a busy machine."""
    out = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for i in range(n):
        data = json.dumps(event(name, i)).encode()
        start = time.perf_counter()
        subprocess.run(["sh", "-c", command], input=data, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        out.append((time.perf_counter() - start) * 1000)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000 / n
    return out, cpu


def row(label: str, ms: list[float], cpu: float | None = None) -> float:
    extra = f"   cpu {cpu:6.1f} ms" if cpu is not None else ""
    print(f"{label:<42} p50 {pct(ms, 0.5):7.1f} ms   p95 {pct(ms, 0.95):7.1f} ms   max {max(ms):7.1f} ms{extra}")
    return cpu if cpu is not None else pct(ms, 0.5)


def claude_runs(daemon: BenchDaemon, calls: int = 10, runs: int = 7) -> None:
    """(g): median wall-clock time of a Claude Code run with `calls` tool calls, hooked and not."""
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from loopwarden.sessions.claude_launch import bundled_binary
    from tests.fakes.anthropic_server import FakeAnthropic, call, say

    claude = bundled_binary()
    if claude is None:
        print("(g) skipped: claude-agent-sdk is not installed")
        return
    quiet = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1"}
    script = [call("Bash", {"command": f"echo {i}"}) for i in range(calls)] + [say("done")]
    setups = {}
    for hooked in (False, True):
        root = Path(tempfile.mkdtemp(prefix="lw-hook-claude-"))
        (root / "project").mkdir()
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(root), "LOOPWARDEN_HOME": str(daemon.home), **quiet}
        if hooked:
            subprocess.run([str(SCRIPT), "hook", "install", "--project"], cwd=root / "project", env=env,
                           stdout=subprocess.DEVNULL, check=True)
        setups[hooked] = (root / "project", env)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(runs):  # interleaved, so a change in the machine's load hits both alike
        for hooked, (project, env) in setups.items():
            fake = FakeAnthropic(script, max_turns=calls + 2).start()
            start = time.perf_counter()
            subprocess.run([str(claude), "-p", "go", "--max-turns", str(calls + 2), "--allowedTools", "Bash"],
                           cwd=project, env={**env, **fake.env()}, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=300, check=False)
            times[hooked].append((time.perf_counter() - start) * 1000)
            fake.stop()
    medians = {hooked: sorted(ms)[len(ms) // 2] for hooked, ms in times.items()}
    for hooked, ms in medians.items():
        print(f"(g) Claude Code, {calls} tool calls, {'hooked' if hooked else 'no hooks'}: median {ms:.0f} ms "
              f"of {runs} runs")
    print(f"(g) added per tool call, real CLI: {(medians[True] - medians[False]) / calls:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--claude", action="store_true", help="also time the real Claude Code CLI")
    args = parser.parse_args()
    n = args.n
    hook = f"{shlex.quote(str(SCRIPT))} hook claude-code"
    full_cli = (f"{shlex.quote(PY)} -c 'import sys; sys.argv[1:] = [\"hook\", \"claude-code\"]; "
                "from loopwarden.cli import run; run()'")
    with BenchDaemon("hook") as daemon:
        env = daemon.env
        floor = row("(a) sh -c true", *timed("true", env, n))
        row("(b) sh -c 'python -c pass'", *timed(f"{shlex.quote(PY)} -c pass", env, n))
        pre = row("(c) hook, PreToolUse, daemon running", *timed(hook, env, n))
        post = row("(c) hook, PostToolUse, daemon running", *timed(hook, env, n, "PostToolUse"))
        row("(e) hook through the full command line", *timed(full_cli, env, n))
        socket_path = str(daemon.paths.socket)
        os.environ["LOOPWARDEN_HOOK_TIMEOUT"] = "5"
        inproc = []
        for i in range(n):
            start = time.perf_counter()
            decide(event("PreToolUse", n + i), socket_path)
            inproc.append((time.perf_counter() - start) * 1000)
        row("(f) in-process round trip only", inproc)
        snap = next(s for s in daemon.request("list") if s.get("claude_session") == "bench")
        assert snap["tool_calls"] == 3 * n and snap["state"] == "running", snap
        if args.claude:
            claude_runs(daemon)
    dead = {**env, "LOOPWARDEN_HOME": str(daemon.home / "gone")}
    row("(d) hook, no daemon (fail-open)", *timed(hook, dead, n))
    print(f"\nadded per tool call (PreToolUse + PostToolUse, CPU time, minus the sh floor): "
          f"{pre + post - 2 * floor:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
