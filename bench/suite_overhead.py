"""What every live test pays: a daemon's start (spawn to its socket answering), one `loopwarden ls`, and
the daemon's stop (SIGTERM to exit), for each source tree given, interleaved, six repeats, medians.

    .venv/bin/python bench/suite_overhead.py /tmp/main-copy .

A tree is used through PYTHONPATH, with PYTHONDONTWRITEBYTECODE=1 as on CI: compile a tree first
(`python -m compileall -q TREE/loopwarden`) to measure it with bytecode.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPEATS = 6


def once(tree: str) -> tuple[float, float, float]:
    env = {k: v for k, v in os.environ.items() if k != "CLAUDECODE"}
    env.update(PYTHONPATH=os.path.abspath(tree), LOOPWARDEN_HOME=tempfile.mkdtemp(prefix="lw-overhead"),
               PYTHONDONTWRITEBYTECODE="1")
    where = subprocess.run([sys.executable, "-c", "from loopwarden.paths import default_paths; "
                            "print(default_paths().socket)"], env=env, capture_output=True, text=True, check=True)
    path = where.stdout.strip()
    started = time.monotonic()
    daemon = subprocess.Popen([sys.executable, "-m", "loopwarden", "serve"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    while True:
        try:
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(path)
            break
        except OSError:
            time.sleep(0.002)
    up = time.monotonic()
    subprocess.run([sys.executable, "-m", "loopwarden", "ls"], env=env, capture_output=True, check=False)
    listed = time.monotonic()
    fd = os.pidfd_open(daemon.pid)
    daemon.send_signal(signal.SIGTERM)
    select.select([fd], [], [], 20)
    os.close(fd)
    daemon.wait()
    return up - started, listed - up, time.monotonic() - listed


def main(trees: list[str]) -> None:
    times: dict[str, list[tuple[float, float, float]]] = {tree: [] for tree in trees}
    for _ in range(REPEATS):
        for tree in trees:
            times[tree].append(once(tree))
    print(f"load {os.getloadavg()[0]:.2f}")
    for tree, rows in times.items():
        start, ls, stop = (statistics.median(column) for column in zip(*rows, strict=True))
        print(f"{tree}: start {start:.3f} s, ls {ls:.3f} s, stop {stop:.3f} s (medians of {REPEATS})")


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
