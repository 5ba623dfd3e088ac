"""The live session's engine path in-process, per line: `protocol.parse_line` + `SessionHealth.observe`.

    .venv/bin/python bench/engine_path.py [LINES] [RUNS]                      # this checkout's engine
    PYTHONPATH=/tmp/before .venv/bin/python bench/engine_path.py 120000 3     # another engine (a git archive)

Over the lines of tests/agents/paced_flood.py (the agents of live_ingest.py's flood), with the default
configuration; prints CPU time per line, the best of RUNS. No pipes, no store: what the daemon's
judging costs per line, apart from reading and recording. Always exits 0.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "agents"))

from paced_flood import event_line

from loopwarden.supervisor import protocol
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.health import SessionHealth


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 120_000
    runs = int(argv[1]) if len(argv) > 1 else 3
    lines = [event_line(i, 1000.0 + i * 0.001).encode()[:-1] for i in range(n)]
    best = float("inf")
    for _ in range(runs):
        health = SessionHealth(load_config(env={}))
        parse, observe = protocol.parse_line, health.observe
        start = time.process_time()
        for seq, line in enumerate(lines, 1):
            event = parse(line, seq)
            observe(event, event.ts or 0.0)
        best = min(best, time.process_time() - start)
        assert health.state != "terminated", health.termination
    if runs:
        print(f"{best / n * 1e6:.2f} us per line ({n:,} lines, best of {runs}; engine {protocol.__file__})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
