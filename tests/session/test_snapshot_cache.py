"""A live session's snapshot is cached between changes (runtime/session/view.py): what it shows is
always what a fresh build shows, the clock's fields move on their own, and any change is seen at once."""

from __future__ import annotations

from typing import Any

from loopwarden.runtime.session import LiveSession, Resources, SessionSpec
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.events import ToolCall
from loopwarden.supervisor.verdicts import SessionState
from tests.support.clock import Clock


def running(clock: Clock) -> tuple[LiveSession, list[str]]:
    published: list[str] = []

    def sink(kind: str, session_id: str, data: dict[str, Any], size: int = 0, at: float | None = None) -> None:
        published.append(kind)

    session = LiveSession(SessionSpec(id="s1", name="quiet", command=["agent"]), load_config(),
                          adapters()["native"](), sink=sink, clock=clock)
    session.pid, session.state, session.started_at = 4321, SessionState.RUNNING, clock()
    session.health.started(clock())
    return session, published


def fresh(session: LiveSession) -> dict[str, Any]:
    snap = session.view.build(session.clock())
    snap["rate"] = session.judge.rate_view(session.clock())
    return snap


def test_the_cached_snapshot_is_what_a_fresh_build_shows_and_the_clock_moves_it() -> None:
    clock = Clock()
    session, _ = running(clock)
    first = session.snapshot()
    assert first == fresh(session) and list(first) == list(fresh(session))
    clock.now += 12.5  # nothing changed but the time: served from the cache, the clock's fields moved
    later = session.snapshot()
    assert session.view.cache is not None and later == fresh(session)
    assert later["runtime"] == 12.5 and later["counters"]["runtime"][0] == 12.5
    assert later["counters"]["silence"][0] == 12.5 and first["counters"]["runtime"][0] == 0.0
    session.resources = Resources(cpu_percent=42.04, rss=1 << 20, processes=3, open_files=9)
    assert session.snapshot() == fresh(session)  # the sampler replaced the resources without publishing


def test_a_change_is_seen_at_once_published_or_not() -> None:
    clock = Clock()
    session, published = running(clock)
    before = session.snapshot()
    session.health.observe(ToolCall(seq=1, tool="read_file", args={"path": "a.py"}), clock())  # no publish
    session.judge.tool_calls += 1
    after = session.snapshot()
    assert after["events"] == before["events"] + 1 and after["tool_calls"] == 1 and after == fresh(session)
    session.spec.name = "renamed"
    assert session.snapshot()["name"] == "quiet"  # near miss: a change nobody published is not picked up...
    session.journal.publish()
    assert session.snapshot()["name"] == "renamed" and published[-1] == "session"  # ... until it is


def test_an_ended_session_shows_its_final_runtime_however_late_it_is_asked() -> None:
    clock = Clock()
    session, _ = running(clock)
    clock.now += 5.0
    session.ended_at, session.state = clock(), SessionState.EXITED
    clock.now += 100.0
    snap = session.snapshot()
    assert snap["runtime"] == 5.0 and snap == fresh(session)  # the counters as of its last event or tick


def test_moved_resources_are_published_from_the_cached_snapshot_and_a_change_is_built_again() -> None:
    clock = Clock()
    session, published = running(clock)
    session.snapshot()
    cached = session.view.cache
    session.resources = Resources(cpu_percent=87.5, rss=3 << 20, processes=2, open_files=4)
    session.journal.resources_moved()  # as the sampler does when the numbers moved
    snap = session.snapshot()
    assert published[-1] == "session" and session.view.cache is cached  # published, not built again
    assert snap == fresh(session) and snap["cpu_percent"] == 87.5 and snap["rss"] == 3 << 20
    session.journal.publish()  # near miss: any other change builds it again
    session.snapshot()
    assert session.view.cache is not cached
