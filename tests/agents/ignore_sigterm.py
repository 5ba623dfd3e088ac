"""An agent that ignores SIGTERM, with a child and a grandchild that ignore it too.

    python tests/agents/ignore_sigterm.py

Prints a hello line, starts a child (this script with --child) which starts a
grandchild `python -c "import time; time.sleep(600)"` with subprocess.Popen;
SIGTERM is ignored in all three (an ignored signal stays ignored across exec).
It writes `{"type":"assistant_message","text":"child <pid>"}` and the child
writes `{"type":"assistant_message","text":"grandchild <pid>"}`. Then each
sleeps "forever" (10 minutes at most, so a leaked process goes away on its
own). Only SIGKILL ends them; all stay in the caller's process group.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

LIFETIME = 600.0


def line(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def sleep_forever() -> None:
    end = time.monotonic() + LIFETIME
    while time.monotonic() < end:
        time.sleep(min(60.0, max(0.0, end - time.monotonic())))


def main() -> int:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--child" in sys.argv[1:]:
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        line({"type": "assistant_message", "text": f"grandchild {grandchild.pid}"})
        sleep_forever()
        return 0
    line({"type": "hello", "name": "ignore-sigterm", "protocol": 1})
    child = subprocess.Popen([sys.executable, __file__, "--child"])
    line({"type": "assistant_message", "text": f"child {child.pid}"})
    sleep_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
