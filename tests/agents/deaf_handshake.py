"""A handshake agent that never reads its stdin: tool_calls as fast as the pipe takes them.

    python tests/agents/deaf_handshake.py [--seconds N]

Announces the handshake (so the supervisor owes it a verdict line per call),
then writes tool_calls with arguments that never repeat and never reads a byte
of what the supervisor writes back. Until `--seconds` pass (default: forever).
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=0.0)
    args = parser.parse_args()
    end = time.monotonic() + args.seconds if args.seconds else float("inf")
    os.write(1, b'{"type":"hello","name":"deaf","protocol":1,"handshake":true}\n')
    i = 0
    while time.monotonic() < end:
        batch = "".join(f'{{"type":"tool_call","tool":"read","args":{{"path":"f{i + k}"}},"call_id":"c{i + k}"}}\n'
                        for k in range(100))
        os.write(1, batch.encode())
        i += 100
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
