"""An agent that talks without acting: N assistant messages, then it records what it is sent.

    python tests/agents/monologue_agent.py RECORD_FILE N [SECRET_ENV_VAR]

Sends hello (no handshake), then N assistant_message lines with no tool call between them (the
first one quotes the value of SECRET_ENV_VAR, as an agent that printed its environment would).
Then it reads its stdin and appends every line it receives (injections, stop) to RECORD_FILE,
flushed, until a stop line or the end of its stdin.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    record = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 - kept open for the whole run
    n = int(sys.argv[2])
    secret = os.environ.get(sys.argv[3], "") if len(sys.argv) > 3 else ""
    os.write(1, b'{"type":"hello","name":"monologue","protocol":1}\n')
    for i in range(1, n + 1):
        text = f"step {i}: still explaining the plan" + (f" (env says {secret})" if i == 1 and secret else "")
        os.write(1, (json.dumps({"type": "assistant_message", "text": text}) + "\n").encode())
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = os.read(0, 65536)
            if not chunk:
                return 0
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        record.write(line.decode() + "\n")
        if json.loads(line).get("type") == "stop":
            return 0


if __name__ == "__main__":
    sys.exit(main())
