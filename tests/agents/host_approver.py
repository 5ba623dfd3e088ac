"""An agent that tries to decide a gate on another host: it clears its session's mark and runs the CLI.

    host_approver.py HOST REF OUT_FILE [console]

Runs `env -u LOOPWARDEN_SESSION -u LOOPWARDEN_SESSION_DAEMON loopwarden --host HOST approve REF` and writes
its exit code, then its stdout and stderr, to OUT_FILE; exits 0. With `console`, asks the console's HostsFeed
(attached to HOST only) to approve HOST:REF instead and writes what it answered.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> None:
    host, ref, out = sys.argv[1:4]
    if sys.argv[4:] == ["console"]:
        Path(out).write_text(through_console(host, ref))
        return
    done = subprocess.run(["env", "-u", "LOOPWARDEN_SESSION", "-u", "LOOPWARDEN_SESSION_DAEMON", sys.executable,
                           "-m", "loopwarden", "--host", host, "approve", ref], capture_output=True, text=True,
                          timeout=60, check=False)
    Path(out).write_text(f"{done.returncode}\n{done.stdout}{done.stderr}")


def through_console(host: str, ref: str) -> str:
    from loopwarden.runtime.client import DaemonError
    from loopwarden.widgets.hosts_feed import HostsFeed

    feed = HostsFeed.attach(None, [host])
    feed.start()
    try:
        feed.wait_ready(30)
        return f"0\n{feed.request('approve', gate=f'{host}:{ref}')}"
    except DaemonError as exc:
        return f"1\n{exc}"
    finally:
        feed.close()


if __name__ == "__main__":
    main()
