"""A program that does not speak the protocol: plain text lines on stdout and stderr.

    python tests/agents/plain_chatter.py [LINES] [--interval SECONDS] [--exit CODE]

Writes LINES (default 5) lines to stdout and as many to stderr, alternating,
flushed one by one, optionally pausing between them, then exits with CODE
(default 0).
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    args = sys.argv[1:]
    interval = 0.0
    code = 0
    if "--interval" in args:
        i = args.index("--interval")
        interval = float(args[i + 1])
        del args[i:i + 2]
    if "--exit" in args:
        i = args.index("--exit")
        code = int(args[i + 1])
        del args[i:i + 2]
    n = int(args[0]) if args else 5
    for i in range(1, n + 1):
        print(f"Compiling module {i} of {n}...", flush=True)
        print(f"warning: module {i} uses a deprecated API", file=sys.stderr, flush=True)
        if interval:
            time.sleep(interval)
    print("Build finished.", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
