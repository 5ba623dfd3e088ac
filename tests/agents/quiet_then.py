"""An agent silent on stdout until told: it waits until the file RELEASE exists, writes each LINE, exits 0.

Usage: quiet_then.py RELEASE [LINE...]
"""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    release, lines = sys.argv[1], sys.argv[2:]
    deadline = time.monotonic() + 120  # never outlives a failed test for long
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.02)
    for line in lines:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
