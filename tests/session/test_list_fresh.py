"""`list` sends each session's snapshot as `status` shows it, and a change shows in the very next `list`: a guard
for any cache of snapshots or of their encoding (runtime/session/view.py, registry.py, ops_read.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from loopwarden.paths import Paths
from loopwarden.runtime.daemon import Daemon
from loopwarden.runtime.session import LiveSession, Resources, SessionSpec
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.events import ToolCall
from loopwarden.supervisor.verdicts import SessionState
from tests.support.clock import Clock

HELLO = b'{"type":"hello","name":"quiet","protocol":1,"handshake":false}\n'


def running(clock: Clock, sid: str = "s1", sink: Any = None, records: Any = None) -> LiveSession:
    session = LiveSession(SessionSpec(id=sid, name=f"quiet-{sid}", command=["agent", "50%", "%b"]), load_config(),
                          adapters()["native"](), sink=sink or (lambda *a, **k: None), clock=clock, records=records)
    session.pid, session.state, session.started_at = 4321, SessionState.RUNNING, clock()
    session.health.started(clock())
    return session


def test_list_sends_every_snapshot_as_status_shows_it_and_the_next_list_shows_a_change(tmp_path: Path) -> None:
    """Through the daemon's `list` op and the reply's encoding, against the registry's `snapshot` of each session
    (live, live with dropped events, and ended in `recent`)."""

    async def go() -> None:
        clock = Clock()
        home = tmp_path
        daemon = Daemon(Paths(runtime=home / "run", data=home / "data", cache=home / "cache"), clock=clock)
        (home / "data").mkdir(parents=True)
        assert daemon.recorder.open()
        registry = daemon.registry
        try:
            for i in (1, 2, 3):
                session = running(clock, f"s{i}", daemon.router.sink, daemon.recorder)
                registry.sessions[session.spec.id] = session
                session.reader.read_stdout().data_received(HELLO)
                if session.journal.progress_timer is not None:
                    session.journal.progress_timer.cancel()
                    session.journal.progress_timer = None
            daemon.recorder.dropped["s2"] = 7
            ended = registry.sessions.pop("s3")
            ended.ended_at, ended.state = clock(), SessionState.EXITED
            registry.recent.add("s3", registry.live_snapshot(ended))

            async def listed() -> list[dict[str, Any]]:
                from loopwarden.runtime.server import _reply

                reply = orjson.loads(_reply(1, result=await daemon.server.handlers["list"]({"op": "list"})))
                assert reply["ok"]
                expected = [registry.snapshot(sid) for sid in registry.all_sessions()]
                assert reply["result"] == expected  # what status shows, session by session
                return list(reply["result"])

            first = await listed()
            assert [s["id"] for s in first] == ["s3", "s1", "s2"] and first[2]["dropped_events"] == 7
            clock.now += 1.5
            session = registry.sessions["s1"]
            session.agent_process.operator_paused = True  # a change the operator made: seen by the next list
            session.health.observe(ToolCall(seq=2, tool="sh", args={"cmd": "make"}), clock())
            session.resources = Resources(cpu_percent=12.5, rss=5 << 20, processes=2, open_files=6)
            daemon.recorder.dropped["s2"] = 9
            second = await listed()
            s1 = second[1]
            assert s1["state"] == "paused" and s1["events"] == first[1]["events"] + 1
            assert s1["cpu_percent"] == 12.5 and s1["runtime"] == 1.5 and second[2]["dropped_events"] == 9
            assert second[0] == first[0]  # the ended session, as it was kept
        finally:
            daemon.recorder.close()

    asyncio.run(go())
