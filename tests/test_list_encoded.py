"""`list` sends each session's snapshot from its kept encoding (runtime/session.py `snapshot_json`, snapshot.py
`Encoded`, history.py's encoded ended snapshots): the bytes are always what encoding a fresh snapshot writes,
the clock's and the sampler's fields move on their own, and a change shows in the very next `list`."""

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

HELLO = b'{"type":"hello","name":"quiet","protocol":1,"handshake":false}\n'


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def running(clock: Clock, sid: str = "s1", sink: Any = None, records: Any = None) -> LiveSession:
    session = LiveSession(SessionSpec(id=sid, name=f"quiet-{sid}", command=["agent", "50%", "%b"]), load_config(),
                          adapters()["native"](), sink=sink or (lambda *a, **k: None), clock=clock, records=records)
    session.pid, session.state, session.started_at = 4321, SessionState.RUNNING, clock()
    session.health.runtime.started_at = session.health.runtime.last_activity = clock()
    return session


def same(session: LiveSession, tail: bytes = b"") -> bool:
    """The kept encoding is byte for byte what orjson writes for a fresh `snapshot()` (the same keys, same order)."""
    fresh = orjson.dumps(session.snapshot(), default=str)
    return session.snapshot_json(tail) == fresh[:-1] + tail + b"}"


def test_the_encoding_is_the_snapshots_as_the_clock_and_the_sampler_move_it() -> None:
    clock = Clock()
    session = running(clock)
    assert same(session) and same(session, b',"dropped_events":3')
    kept = session._snap_json
    for step in (0.001, 0.049, 0.05, 0.1234, 12.5, 3600.0):  # runtime (ms), the runtime and silence counters
        clock.now += step
        assert same(session)
        assert orjson.loads(session.snapshot_json())["runtime"] == round(clock.now - 1_000_000.0, 3)
    session.resources = Resources(cpu_percent=42.04, rss=1 << 20, processes=3, open_files=9)
    assert same(session) and orjson.loads(session.snapshot_json())["cpu_percent"] == 42.0
    session._count_rate(clock(), 5)  # events this second, then the next seconds
    assert same(session)
    clock.now += 2.0
    assert same(session) and orjson.loads(session.snapshot_json())["rate"][-3:] == [5, 0, 0]
    assert session._snap_json is kept  # none of that changed what is kept: only the moving values were encoded


def test_a_change_shows_at_once_published_or_not_and_a_stale_encoding_is_never_sent() -> None:
    clock = Clock()
    session = running(clock)
    before = orjson.loads(session.snapshot_json())
    session.health.observe(ToolCall(seq=1, tool="read_file", args={"path": "a.py"}), clock())  # no publish
    session.tool_calls += 1
    after = orjson.loads(session.snapshot_json())
    assert after["events"] == before["events"] + 1 and after["tool_calls"] == 1 and same(session)
    session.operator_paused = True
    assert orjson.loads(session.snapshot_json())["state"] == "paused" and same(session)
    session.spec.name = "renamed"
    assert orjson.loads(session.snapshot_json())["name"] == "quiet-s1"  # as snapshot(): unpublished, not seen...
    session._publish()
    assert orjson.loads(session.snapshot_json())["name"] == "renamed" and same(session)  # ... until published


def test_an_ended_session_is_encoded_with_its_final_runtime() -> None:
    clock = Clock()
    session = running(clock)
    session.snapshot_json()
    clock.now += 5.0
    session.ended_at, session.state = clock(), SessionState.EXITED
    clock.now += 100.0
    assert same(session) and orjson.loads(session.snapshot_json())["runtime"] == 5.0


def test_list_sends_every_snapshot_as_status_shows_it_and_the_next_list_shows_a_change(tmp_path: Path) -> None:
    """Through the daemon's `op_list` and the reply's encoding, against `_snapshot` of each session (live, live
    with dropped events, and ended in `recent`)."""

    async def go() -> None:
        clock = Clock()
        home = tmp_path
        daemon = Daemon(Paths(runtime=home / "run", data=home / "data", cache=home / "cache"), clock=clock)
        (home / "data").mkdir(parents=True)
        assert daemon.recorder.open()
        try:
            for i in (1, 2, 3):
                session = running(clock, f"s{i}", daemon.sink, daemon.recorder)
                daemon.sessions[session.spec.id] = session
                session._read_stdout().data_received(HELLO)
                if session._progress_timer is not None:
                    session._progress_timer.cancel()
            daemon.recorder.dropped["s2"] = 7
            ended = daemon.sessions.pop("s3")
            ended.ended_at, ended.state = clock(), SessionState.EXITED
            daemon.recent.add("s3", daemon._live_snapshot(ended))

            async def listed() -> list[dict[str, Any]]:
                from loopwarden.runtime.server import _reply

                reply = orjson.loads(_reply(1, result=await daemon.op_list({"op": "list"})))
                assert reply["ok"]
                expected = [daemon._snapshot(sid) for sid in daemon._all_sessions()]
                assert reply["result"] == expected  # what status shows, session by session
                return list(reply["result"])

            first = await listed()
            assert [s["id"] for s in first] == ["s3", "s1", "s2"] and first[2]["dropped_events"] == 7
            clock.now += 1.5
            session = daemon.sessions["s1"]
            session.operator_paused = True  # a change the operator made: seen by the next list
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
