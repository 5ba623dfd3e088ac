"""Memory of replaying one very large accepted tool output (target: under 20 MiB of growth for 100 MB).

    .venv/bin/python bench/big_output.py                 # a 100 MB output, spilled as it is read
    .venv/bin/python bench/big_output.py --mb 20 --no-spill

Writes a native stream (a tool_call, a tool_result whose output is --mb megabytes of text with escaped
newlines, quotes and non-ASCII, then done) without holding it, and replays it with
`limits.max_line_bytes` raised so the line is accepted, each measure in a fresh child process:
  baseline: a bare read of the same file in 1 MiB chunks;
  replay:   `Replayer.run` (native), spilling into a temporary directory unless --no-spill.
Prints each child's RSS growth (ru_maxrss after, minus before) and tracemalloc peak, the line's size, and
PASS when the replay grows less than 20 MiB. Always exits 0: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import BinaryIO

TARGET = 20 << 20
_PIECE = 'line {i:07d}: "quoted" text, tab\there, caf\u00e9 \u2713 and more padding to fill the line up\n'


def write_stream(path: Path, size: int) -> int:
    """The stream, written in pieces; returns the length in bytes of its big line."""
    with open(path, "wb") as f:
        return write_to(f, size)[0]


def write_to(f: BinaryIO, size: int) -> tuple[int, int]:
    """Write the stream to `f`; (the big line's length in bytes, its output's length in UTF-8 bytes)."""
    import orjson

    block = "".join(_PIECE.format(i=i) for i in range(2000))
    encoded = orjson.dumps(block)[1:-1]  # the block's JSON string body, escapes included
    f.write(b'{"type":"tool_call","tool":"cat","args":{"path":"big.log"},"call_id":"c1","ts":1.0}\n')
    head = b'{"type":"tool_result","tool":"cat","call_id":"c1","ts":2.0,"output":"'
    f.write(head)
    length, blocks = len(head), 0
    while length < size:
        f.write(encoded)
        length += len(encoded)
        blocks += 1
    tail = b'","exit_code":0}'
    f.write(tail + b"\n")
    f.write(b'{"type":"done","ts":3.0}\n')
    return length + len(tail), blocks * len(block.encode())


def child(mode: str, path: str, spill_dir: str) -> None:
    from loopwarden.replay import Replayer
    from loopwarden.runtime.spill import Spiller
    from loopwarden.supervisor.config import load_config

    config = load_config(env={}, sets=["limits.max_line_bytes=1GiB"])
    spiller = Spiller(spill_dir, session="bench") if spill_dir else None
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    t0 = time.process_time()
    verdicts: list[str] = []
    if mode == "baseline":
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass
    else:
        with open(path, "rb") as f:
            summary = Replayer(config, spiller=spiller, spill=bool(spill_dir)).run(
                f, "native", lambda v: verdicts.append(f"{v.action}:{v.rule}"))
        assert summary.validation_failures == 0, summary.validation_examples
    cpu = time.process_time() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    spilled = sum(p.stat().st_size for p in Path(spill_dir).iterdir()) if spill_dir else 0
    print(json.dumps({"rss_growth": rss - rss0, "tracemalloc_peak": peak, "cpu": cpu, "verdicts": verdicts,
                      "spilled_bytes": spilled}))


def measure(mode: str, path: Path, spill_dir: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--_child", mode, str(path), spill_dir],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"{mode} child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=100, help="size of the output in MB (default 100)")
    p.add_argument("--no-spill", action="store_true", help="replay without writing spill files")
    p.add_argument("--json", action="store_true", help="print the replay's figures as one JSON line (for tests)")
    p.add_argument("--_child", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._child:
        child(*a._child)
        return 0
    with tempfile.TemporaryDirectory(prefix="lw-big-") as tmp:
        path = Path(tmp) / "big.jsonl"
        line = write_stream(path, a.mb * 1_000_000)
        if not a.json:
            print(f"stream: one tool_result line of {line:,} bytes ({mib(line)}), load average "
                  f"{os.getloadavg()[0]:.2f}")
        spill_dir = "" if a.no_spill else str(Path(tmp) / "spill")
        if a.json:
            print(json.dumps({**measure("replay", path, spill_dir), "line": line}))
            return 0
        base = measure("baseline", path, "")
        run = measure("replay", path, spill_dir)
        print(f"{'':<34} {'RSS growth':>12} {'tracemalloc peak':>17} {'CPU':>7}")
        print(f"{'baseline: bare read, 1 MiB chunks':<34} {mib(base['rss_growth']):>12} "
              f"{mib(base['tracemalloc_peak']):>17} {base['cpu']:>6.2f}s")
        print(f"{'replay' + (' (no spill)' if a.no_spill else ', spilled as read'):<34} "
              f"{mib(run['rss_growth']):>12} {mib(run['tracemalloc_peak']):>17} {run['cpu']:>6.2f}s")
        print(f"verdicts: {run['verdicts']}; spill file: {run['spilled_bytes']:,} bytes")
        growth = run["rss_growth"] - base["rss_growth"]
        verdict = "PASS" if growth < TARGET else "FAIL"
        print(f"replay memory growth beyond the bare read: {mib(growth)} for a {mib(line)} line "
              f"({growth / line:.3f}x the line; target < 20 MiB): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
