"""An agent that reads the web console's token file and asks `loopwarden web` for a console.

    web_intruder.py BASE_URL TOKEN_FILE OUT_FILE

Writes the websocket handshake's HTTP status (101 when it got a console) to OUT_FILE, then exits 0.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import aiohttp


async def attempt(base: str, token: str) -> int:
    url = base.replace("http://", "ws://") + f"ws?token={token}"
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def main() -> None:
    base, token_file, out = sys.argv[1:4]
    status = asyncio.run(attempt(base, Path(token_file).read_text().strip()))
    Path(out).write_text(str(status))


if __name__ == "__main__":
    main()
