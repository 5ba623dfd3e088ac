"""The daemon's memory of ended sessions for `restart` stays within its byte budget, newest kept."""

from __future__ import annotations

from loopwarden.runtime.restarts import Restartable, Restartables
from loopwarden.runtime.session import SessionSpec
from loopwarden.supervisor.config import Config


def kept(n: int, env_bytes: int) -> Restartable:
    spec = SessionSpec(id=f"s{n}", name="x", command=["agent"], env={"BIG": "v" * env_bytes})
    return Restartable(spec, Config(), ended="session terminated: repetition loop")


def test_the_oldest_go_first_past_the_byte_budget() -> None:
    book = Restartables(max_bytes=10_000)
    for n in range(1, 6):
        book.add(f"s{n}", kept(n, 3000))
    assert [sid for sid in ("s1", "s2", "s3", "s4", "s5") if book.get(sid)] == ["s4", "s5"]
    assert book.used <= 10_000
    book.add("s5", kept(5, 10))  # replaced, not counted twice
    assert book.used == kept(4, 3000).size + kept(5, 10).size


def test_its_summary_says_how_the_session_ended_and_the_note() -> None:
    text = kept(1, 1).summary("NOTE-3")
    assert "repetition loop" in text and "NOTE-3" in text and text.startswith("This task was restarted")
