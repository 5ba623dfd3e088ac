"""An agent that talks without acting: N assistant messages, then it records what it is sent.

    python tests/agents/monologue_agent.py RECORD_FILE N [SECRET_ENV_VAR [TRIGGER_FILE M]]

Sends hello (no handshake), then N assistant_message lines with no tool call between them (the
first one quotes the value of SECRET_ENV_VAR, as an agent that printed its environment would);
with TRIGGER_FILE, M more once that file exists (so a test decides when the second burst comes).
Meanwhile and after, it appends every line it receives on stdin (injections, stop) to
RECORD_FILE, flushed, until a stop line or the end of its stdin.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def say(first: int, last: int, secret: str) -> None:
    for i in range(first, last + 1):
        text = f"step {i}: still explaining the plan" + (f" (env says {secret})" if i == 1 and secret else "")
        os.write(1, (json.dumps({"type": "assistant_message", "text": text}) + "\n").encode())


def main() -> int:
    record = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 - kept open for the whole run
    n = int(sys.argv[2])
    secret = os.environ.get(sys.argv[3], "") if len(sys.argv) > 3 else ""
    trigger, more = (sys.argv[4], int(sys.argv[5])) if len(sys.argv) > 5 else (None, 0)
    os.write(1, b'{"type":"hello","name":"monologue","protocol":1}\n')
    say(1, n, secret)
    if trigger:
        def later() -> None:
            while not os.path.exists(trigger):
                time.sleep(0.05)
            say(n + 1, n + more, "")
        threading.Thread(target=later, daemon=True).start()
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
