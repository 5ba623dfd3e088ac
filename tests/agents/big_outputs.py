"""Tool results of a chosen size, as fast as the pipe takes them.

    python tests/agents/big_outputs.py COUNT SIZE [--forever] [--rate PAIRS_PER_SECOND]

Writes hello (no handshake), then COUNT tool_call/tool_result pairs whose
outputs are SIZE characters long and all different, then `done`. With
--forever it keeps going until killed; with --rate it writes at most that many
pairs a second. stdin is never read.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    count, size = int(sys.argv[1]), int(sys.argv[2])
    forever = "--forever" in sys.argv[3:]
    rate = float(sys.argv[sys.argv.index("--rate") + 1]) if "--rate" in sys.argv else 0.0
    start = time.monotonic()
    out = sys.stdout
    out.write('{"type":"hello","name":"big_outputs","protocol":1}\n')
    filler = "x" * size
    i = 0
    while forever or i < count:
        out.write(json.dumps({"type": "tool_call", "tool": "cat", "args": {"path": f"f{i}"}, "call_id": f"c{i}"})
                  + "\n")
        head = f"output {i} "
        out.write(json.dumps({"type": "tool_result", "tool": "cat", "call_id": f"c{i}",
                              "output": head + filler[len(head):]}) + "\n")
        i += 1
        ahead = i / rate - (time.monotonic() - start) if rate else 0.0
        if ahead > 0:
            out.flush()
            time.sleep(ahead)
    out.write('{"type":"done"}\n')
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
