"""A process that knocks at every door an operator uses, as an agent inside a session would.

    door_knocker.py PLAN.json

PLAN: {"out": PATH, "go": PATH or null, "web": BASE_URL, "token_file": PATH, "gate": "s1:g1",
       "host": NAME or null, "remote_gate": REF or null}

It waits until the file GO exists (when given: an adopted process is adopted first), clears its session's mark
from the environment its children get, then tries: the web console (an HTTP page and a websocket, with the
token read from its file), `loopwarden --host HOST approve REMOTE_GATE`, and `loopwarden approve GATE` on the
socket. It writes one JSON object to OUT: {"http": status, "websocket": status, "host": [code, stderr],
"socket": [code, stderr]}, and exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

CLEARED = ("LOOPWARDEN_SESSION", "LOOPWARDEN_SESSION_DAEMON", "CLAUDECODE")


async def web(base: str, token: str) -> tuple[int, int]:
    """The status of the page, then of a websocket handshake (101: a console was started)."""
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{base}?token={token}", allow_redirects=False) as page:
            http = page.status
        try:
            async with session.ws_connect(base.replace("http://", "ws://") + f"ws?token={token}"):
                return http, 101
        except aiohttp.WSServerHandshakeError as exc:
            return http, exc.status


def cli(*args: str) -> list[Any]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    done = subprocess.run([sys.executable, "-m", "loopwarden", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    return [done.returncode, done.stderr.strip()]


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    if plan.get("go"):
        deadline = time.monotonic() + 120
        while not os.path.exists(plan["go"]) and time.monotonic() < deadline:
            time.sleep(0.02)
    report: dict[str, Any] = {}
    report["http"], report["websocket"] = asyncio.run(web(plan["web"], Path(plan["token_file"]).read_text().strip()))
    if plan.get("host"):
        report["host"] = cli("--host", plan["host"], "approve", plan["remote_gate"])
    report["socket"] = cli("approve", plan["gate"])
    Path(plan["out"]).write_text(json.dumps(report))


if __name__ == "__main__":
    main()
