"""A session ends even when a process outside it holds the agent's output pipe open forever."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from loopwarden.runtime.session import DRAIN_STALLED
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for


def test_an_agent_whose_pipes_are_held_outside_the_session_still_ends_and_says_why(lw: Harness,
                                                                                    tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(tmp_path / "lend.sock"))
        server.listen(1)
        server.settimeout(30)
        sid = lw.run_detached(PY, str(AGENTS / "pipe_lender.py"), str(tmp_path / "lend.sock"), adapter="plain")
        conn, _ = server.accept()
        with conn:
            _, held, _, _ = socket.recv_fds(conn, 16, 4)
            conn.sendall(b"k")
            try:
                assert len(held) == 2
                lw.wait_state(sid, "exited", timeout=DRAIN_STALLED + 30)  # the pipes are still open here

                def logged() -> list[str]:  # the agent's lines and loopwarden's own, as `logs` shows them
                    return [str(e.get("data", {}).get("text")) for e in lw.events(sid) if e.get("kind") == "log"]

                lines = wait_for(lambda: [line for line in logged() if "holds its pipe open" in line],
                                 what="the reason in the session's log")
                assert "a process outside the session still holds its pipe open" in lines[0]
                assert any("lent my pipes" in str(e.get("data")) for e in lw.events(sid))  # read before the stall
            finally:
                for fd in held:
                    os.close(fd)
