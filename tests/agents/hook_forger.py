"""A process that forges hook events for many made-up agent sessions, straight on the daemon's socket.

    hook_forger.py COUNT OUT_FILE [EXTRA_JSON]

Sends COUNT SessionStart hook requests, each with a new session id (EXTRA_JSON: more fields of the request,
e.g. its config_env), and writes one JSON object to OUT_FILE: how many were given a session, how many were
refused (with the first refusal) and how many were answered with no session.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from loopwarden.paths import default_paths
from loopwarden.runtime.client import Client, DaemonError


def main() -> None:
    count, out = int(sys.argv[1]), Path(sys.argv[2])
    extra = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    made, refused, ignored, first = 0, 0, 0, None
    with Client.connect(default_paths(), autostart=False, name="hook") as client:
        for n in range(count):
            event = {"session_id": f"forged-{os.getpid()}-{n}", "cwd": "/tmp/forged", "hook_event_name": "SessionStart",
                     "source": "startup"}
            try:
                answer = client.request("hook", event=event, hold=0, **extra)
            except DaemonError as exc:
                refused += 1
                first = first or str(exc)
                continue
            if answer.get("session"):
                made += 1
            else:
                ignored += 1
    out.write_text(json.dumps({"made": made, "refused": refused, "ignored": ignored, "first_refusal": first}))


if __name__ == "__main__":
    main()
