"""Replay throughput: the full engine against a bare `json.loads` of every line, plus memory.

    .venv/bin/python bench/gen_stream.py && .venv/bin/python bench/replay_throughput.py
    .venv/bin/python bench/replay_throughput.py --profile 200000   # + cProfile of the engine
    .venv/bin/python bench/replay_throughput.py --profile-only     # only the breakdown and profile

Measures, in one run (see bench/README.md):
  (a) raw:    read the file's lines and stdlib `json.loads` each one      -> events/s
  (b) engine: `Replayer(config).run(open(path, "rb"), "native", count)`   -> events/s
  (c) ratio engine/raw (target: >= 0.5)
  (d) memory: the engine over the whole stream in a fresh child process under tracemalloc,
      with the peak (tracemalloc and ru_maxrss) read after the first 100k events and at the end.
Rates are events per CPU second of this process (time.process_time: other processes on a shared machine
do not count), the best of --runs (default 3), raw and engine runs interleaved.  Always exits 0: it is a
benchmark, not a test.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, BinaryIO

HERE = Path(__file__).resolve().parent
DEFAULT_STREAM = HERE / "out" / "stream.jsonl"
TARGET_RATIO = 0.5  # the engine takes at most twice the time of a bare parse
MAX_MEMORY_GROWTH = 2.0

# The generated stream is a session of ~100+ simulated hours with ~25k iterations; these
# settings keep the engine judging every line instead of stopping at a limit.
BENCH_SETS = [
    "limits.max_iterations=0",   # no iteration cap (the stream has ~25k iterations)
    "limits.max_runtime=0",      # no wall-clock cap (the stream's ts spans days)
    "spill.threshold_chars=0",   # no spilling (outputs are <= 2000 chars anyway)
]


def bench_config():  # type: ignore[no-untyped-def]
    from loopwarden.supervisor.config import load_config

    return load_config(env={}, sets=BENCH_SETS)


class FirstLines:
    """A binary stream that ends after its first `n` lines (read_lines only calls readline)."""

    def __init__(self, f: BinaryIO, n: int) -> None:
        self.f, self.left = f, n

    def readline(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        line = self.f.readline(size)
        if not line or line.endswith(b"\n"):
            self.left -= 1
        return line


def count_lines(path: Path) -> int:
    n = 0
    last = b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


# ---- (a) raw ---------------------------------------------------------------
def run_raw(path: Path) -> tuple[float, int]:
    loads = json.loads
    n = 0
    t0 = time.process_time()
    with open(path, "rb") as f:
        for line in f:
            loads(line)
            n += 1
    return time.process_time() - t0, n


# ---- (b) engine ------------------------------------------------------------
def run_engine(path: Path, config: Any, limit: int | None = None) -> tuple[float, Any, int]:
    from loopwarden.replay import Replayer

    verdicts = 0

    def on_verdict(_v: Any) -> None:
        nonlocal verdicts
        verdicts += 1

    t0 = time.process_time()
    with open(path, "rb") as f:
        stream: Any = f if limit is None else FirstLines(f, limit)
        summary = Replayer(config).run(stream, "native", on_verdict)
    return time.process_time() - t0, summary, verdicts


def check_healthy(summary: Any, lines: int) -> None:
    """The stream is only a fair benchmark if the engine judged every line without terminating."""
    assert summary.events == lines, f"engine judged {summary.events:,} events of {lines:,} lines"
    assert summary.lines == lines, f"engine stopped at line {summary.lines:,} of {lines:,}"
    assert summary.state != "terminated", (
        f"session terminated ({summary.termination}) at line {summary.stopped_at}")


# ---- (d) memory: one fresh child process, so ru_maxrss starts clean ----------
class Checkpoints:
    """A binary stream that records memory once the first `at` lines have been judged."""

    def __init__(self, f: BinaryIO, at: int) -> None:
        self.f, self.at, self.n = f, at, 0
        self.marks: list[dict[str, Any]] = []

    def readline(self, size: int = -1) -> bytes:
        if self.n == self.at and not self.marks:  # the engine has judged lines 1..at
            self.marks.append(memory_mark(self.n))
        line = self.f.readline(size)
        if line.endswith(b"\n"):
            self.n += 1
        return line


def memory_mark(events: int) -> dict[str, Any]:
    current, peak = tracemalloc.get_traced_memory()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {"events": events, "tracemalloc_peak": peak, "retained": current, "rss_peak": rss}


def memory_child(path: Path, small: int) -> None:
    """The engine over the whole stream under tracemalloc, with a mark after `small` events."""
    from loopwarden.replay import Replayer

    config = bench_config()
    with open(path, "rb") as f:
        stream = Checkpoints(f, small)
        replayer = Replayer(config)
        gc.collect()
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        tracemalloc.start()
        t0 = time.perf_counter()
        summary = replayer.run(stream, "native", lambda v: None)
        dt = time.perf_counter() - t0
        marks = stream.marks + [memory_mark(summary.events)]  # `retained`: what the engine still holds
        tracemalloc.stop()
    check_healthy(summary, stream.n)
    for m in marks:
        m["rss_growth"] = m["rss_peak"] - rss0
    print(json.dumps({"rss_before": rss0, "seconds": dt, "marks": marks}))


def measure_memory(path: Path, small: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--stream", str(path), "--_memory-child", str(small)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"memory child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- optional profile --------------------------------------------------------
def prefix_file(path: Path, n: int) -> Path:
    """The first n lines of the stream as their own file (so no wrapper distorts the profile)."""
    out = path.with_name(f"{path.stem}.first{n}{path.suffix}")
    if not out.exists() or out.stat().st_mtime < path.stat().st_mtime:
        with open(path, "rb") as src, open(out, "wb") as dst:
            for i, line in enumerate(src):
                if i >= n:
                    break
                dst.write(line)
    return out


def run_parse_only(path: Path, config: Any) -> tuple[float, int]:
    """The engine's input stage alone: read_lines + orjson + validation + Event objects."""
    from loopwarden.replay import iter_events, max_line_bytes

    n = 0
    t0 = time.process_time()
    with open(path, "rb") as f:
        for _ in iter_events(f, "native", max_line_bytes(config, "native")):
            n += 1
    return time.process_time() - t0, n


def profile_engine(path: Path, config: Any, limit: int, top: int) -> None:
    import cProfile
    import pstats

    prefix = prefix_file(path, limit)
    raw = min(run_raw(prefix)[0] for _ in range(3))
    parse = min(run_parse_only(prefix, config)[0] for _ in range(3))
    engine = min(run_engine(prefix, config)[0] for _ in range(3))
    print(f"\nbreakdown over the first {limit:,} events (CPU time, best of 3, no profiler):")
    print(f"    raw readline+json.loads  {raw:6.2f}s  {limit / raw:>10,.0f} events/s")
    print(f"    engine input stage only  {parse:6.2f}s  {limit / parse:>10,.0f} events/s  "
          f"(read_lines + orjson + validation + Event objects: {100 * parse / engine:.0f}% of the engine)")
    print(f"    full engine              {engine:6.2f}s  {limit / engine:>10,.0f} events/s  "
          f"(guards + SessionHealth: {100 * (engine - parse) / engine:.0f}%)")
    prof = cProfile.Profile()
    prof.enable()
    dt, summary, _ = run_engine(prefix, config)
    prof.disable()
    print(f"\ncProfile of the engine over the first {summary.events:,} events ({dt:.1f}s under the profiler)")
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def engine_version(pkg: Any) -> str:
    """Package version plus the git commit of the engine (and whether it has local edits), compiled or not."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("loopwarden")
    except PackageNotFoundError:
        text = getattr(pkg, "__version__", "?")
    root = Path(pkg.__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "loopwarden"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return text
    compiled = getattr(pkg, "compiled", None)  # a checkout from before the compiled engine has none
    kind = compiled.describe() if compiled else "engine in pure Python"
    return f"{text} (git {head}{', engine modified' if dirty else ''}; {kind})" if head else f"{text} ({kind})"


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stream", type=Path, default=DEFAULT_STREAM,
                   help=f"native JSONL stream (default {DEFAULT_STREAM})")
    p.add_argument("--runs", type=int, default=3, help="timed runs per rate; the best is kept (default 3)")
    p.add_argument("--small", type=int, default=100_000,
                   help="memory checkpoint: events before the first mark (default 100,000)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    p.add_argument("--profile", type=int, metavar="N", default=0, help="also cProfile the engine over N events")
    p.add_argument("--profile-only", action="store_true", help="only the --profile part (skip the benchmark)")
    p.add_argument("--top", type=int, default=20, help="rows of the profile to print (default 20)")
    p.add_argument("--_memory-child", type=int, dest="memory_child", default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.runs = max(1, a.runs)

    if a.memory_child:
        memory_child(a.stream, a.memory_child)
        return 0
    if not a.stream.exists():
        print(f"{a.stream} does not exist; run: .venv/bin/python bench/gen_stream.py", file=sys.stderr)
        return 0

    import loopwarden

    config = bench_config()
    if a.profile_only:
        profile_engine(a.stream, config, a.profile or 200_000, a.top)
        return 0
    t_start = time.perf_counter()
    lines = count_lines(a.stream)  # also warms the page cache
    size = a.stream.stat().st_size
    print(f"stream: {a.stream} ({lines:,} lines, {mb(size)}, {size / max(lines, 1):,.0f} B/line)")
    print(f"python {sys.version.split()[0]}, loopwarden {engine_version(loopwarden)}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; best of {a.runs} runs per rate")
    print("config: load_config(env={}, sets=[" + ", ".join(BENCH_SETS) + "]) "
          "(no iteration cap, no runtime cap, no spilling); everything else is the default")

    raw_times = []
    eng_times = []
    summary = None
    verdicts = 0
    unhealthy = None
    for _ in range(a.runs):  # interleaved: a change in the machine's load touches both alike
        dt, n = run_raw(a.stream)
        assert n == lines
        raw_times.append(dt)
        gc.collect()
        dt, summary, verdicts = run_engine(a.stream, config)
        try:
            check_healthy(summary, lines)  # the engine judged every line and did not terminate
        except AssertionError as exc:
            unhealthy = str(exc)
        eng_times.append(dt)
    raw_rate = lines / min(raw_times)
    eng_rate = summary.events / min(eng_times)
    ratio = eng_rate / raw_rate

    print()
    print(f"{'measure (CPU time)':<44} {'best':>10} {'runs (s)':>24} {'events/s':>12}")
    print(f"{'(a) raw: readline + stdlib json.loads':<44} {min(raw_times):>9.2f}s "
          f"{' '.join(f'{t:.2f}' for t in raw_times):>24} {raw_rate:>12,.0f}")
    print(f"{'(b) engine: Replayer.run(native)':<44} {min(eng_times):>9.2f}s "
          f"{' '.join(f'{t:.2f}' for t in eng_times):>24} {eng_rate:>12,.0f}")
    print(f"    engine: state={summary.state}, events={summary.events:,}, verdicts={verdicts:,} "
          f"{dict(sorted(summary.by_action.items()))}, pending gates={len(summary.pending_gates)}")
    print(f"    verdicts by rule: {dict(sorted(summary.by_rule.items()))}")
    print(f"{'(c) ratio engine/raw':<44} {ratio:>10.2f}   (target >= {TARGET_RATIO})")
    if unhealthy:
        print(f"FAIL: the stream is not healthy for this engine, the rates are not comparable: {unhealthy}")

    mem = None
    if not a.no_memory:
        small = min(a.small, lines - 1)
        try:
            mem = measure_memory(a.stream, small)
        except RuntimeError as exc:
            print(f"\n(d) memory: FAIL: {exc}")
            mem = None
    if not a.no_memory and mem is not None:
        first, full = mem["marks"][0], mem["marks"][-1]
        print()
        print(f"(d) memory of the engine phase: one fresh process under tracemalloc ({mem['seconds']:.0f}s), "
              f"RSS before the engine {mb(mem['rss_before'])}")
        print(f"    {'after':>16} {'tracemalloc peak':>17} {'retained':>10} {'RSS growth':>11} {'RSS peak':>10}")
        for m in (first, full):
            print(f"    {m['events']:>9,} events {mb(m['tracemalloc_peak']):>17} {mb(m['retained']):>10} "
                  f"{mb(m['rss_growth']):>11} {mb(m['rss_peak']):>10}")
        growth = full["tracemalloc_peak"] / max(first["tracemalloc_peak"], 1)
        verdict = "PASS" if growth <= MAX_MEMORY_GROWTH else "FAIL"
        print(f"    tracemalloc peak {full['events']:,} / {first['events']:,} events = {growth:.2f}x "
              f"(flat if <= {MAX_MEMORY_GROWTH:.0f}x): {verdict}")

    if a.profile:
        profile_engine(a.stream, config, a.profile, a.top)

    print(f"\ntotal benchmark time {time.perf_counter() - t_start:.0f}s, load average {os.getloadavg()[0]:.2f}")
    verdict = "PASS" if ratio >= TARGET_RATIO else "FAIL (below target)"
    if unhealthy:
        verdict += " -- but INVALID: the engine terminated the session early (see above)"
    print(f"ratio engine/raw = {ratio:.2f} (target >= {TARGET_RATIO}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
