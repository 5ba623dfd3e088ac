"""A native line's row stored from its typed record (`typed.stored_json`, `RecordRouting.sink_rows`) holds what
the record built from the event held (`Event.to_dict` and its seq), in the same order among the other rows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.agents.paced_flood import event_line
from tests.native.test_protocol_schema import valid_objects
from loopwarden.paths import Paths
from loopwarden.runtime.daemon import Daemon
from loopwarden.runtime.records import Recorder
from loopwarden.runtime.session import LiveSession, SessionSpec
from loopwarden.runtime.store import TEXT_CAP
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor import protocol, typed
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.verdicts import SessionState


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (5 == 5.0, yet a reader would see another value)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def as_stored(line: bytes, seq: int) -> tuple[Any, Any] | None:
    """(the stored JSON read back, what `to_dict` gives) for a line the typed decoder reads; None otherwise."""
    try:
        record = typed.decode_record(line)
        event = typed.EVENT_OF[type(record)](record, seq)
    except typed.REFUSED:
        return None
    if event is None:
        return None
    assert event == protocol.parse_line(line, seq)
    data = typed.stored_json(record, event)
    if data is None:
        return None
    return orjson.loads(data), {**event.to_dict(), "seq": seq}


@pytest.mark.parametrize("kind", list(protocol.FIELDS))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_typed_lines_stored_json_is_its_events_record(kind: str, data: st.DataObject) -> None:
    obj = data.draw(valid_objects(kind))
    obj.pop("extras", None)
    line = orjson.dumps({k: v for k, v in obj.items() if k == "type" or k in {"ts", "task", "agent"}
                         or any(n == k for n, _, _ in protocol.FIELDS[kind])})
    both = as_stored(line, 7)
    if both is not None:
        assert same(*both), (line, both)


@pytest.mark.parametrize("line", [
    b'{"type":"tool_result","output":"ok","is_error":true,"exit_code":3,"ts":5}',
    b'{"type":"tool_result","output":"ok","call_id":null,"tool":"sh"}',
    b'{"ts": 1.5 , "type" : "tool_call", "tool":"sh","args":{"n":18446744073709551615,"f":1e400,"d":{"a":[1,2.0]}}}',
    b'{"type":"tool_call","tool":"sh","args":{"n":123456789012345678901234567890}}',
    b'{"type":"tool_call","tool":"sh","args":{"k":1,"k":2},"call_id":"c"}',
    b'{"type":"assistant_message","text":"caf\\u00e9 \\ud83d\\ude00 \xc3\xa9\\n\\t\\u0001"}',
    b'{"type":"condensation"}',
    b'{"type":"usage","input_tokens":1,"output_tokens":2,"cost_usd":3}',
    b'{"type":"test_result","passed":1,"failed":0,"coverage":0.5,"failing":[]}',
    b'{"type":"error","message":"m","stack":null}',
    b'{"type":"done","summary":"s","task":"t","agent":"a"}',
])
def test_edge_lines_are_stored_as_their_records(line: bytes) -> None:
    both = as_stored(line, 3)
    if both is not None:
        assert same(*both), both


def test_a_lines_own_seq_is_overwritten_by_the_events() -> None:
    """The records have a `seq` field (so that the encoding holds the event's): a line's own "seq" is read by the
    typed decoder, yet the event and its stored JSON carry the session's seq, as on the careful path."""
    for line in (b'{"type":"assistant_message","text":"t","seq":99}', b'{"type":"tool_result","output":"o","seq":-1}'):
        record = typed.decode_record(line)
        event = typed.EVENT_OF[type(record)](record, 3)
        assert event == protocol.event_from_object(orjson.loads(line), 3)
        data = typed.stored_json(record, event)
        assert data is not None and orjson.loads(data)["seq"] == 3


def test_kinds_with_other_defaults_are_not_encoded() -> None:
    for line in (b'{"type":"hello"}', b'{"type":"attempt","task":"t","status":"done"}',
                 b'{"type":"validation_error","message":"m"}'):
        record = typed.decode_record(line)
        assert typed.stored_json(record, typed.EVENT_OF[type(record)](record, 1)) is None


# ---- the live path: sessions of a real daemon's record routing, with and without stored lines ----------------

LINES = [
    b'{"type":"hello","name":"t","protocol":1,"handshake":false}',
    *[event_line(i, 100.0 + i).encode()[:-1] for i in range(60)],
    b'{"type":"tool_result","output":"boom","is_error":true,"exit_code":2,"ts":7}',
    b'{"type":"assistant_message","text":"caf\\u00e9 \xc3\xa9","agent":"a","task":null}',
    b'{"type":"attempt","task":"t","status":"blocked","blockers":["x"]}',
    b'{"type":"validation_error","message":"bad","raw":{"a":[1]}}',
    b'{"type":"assistant_message","text":"x","unknown":1}',
    b'not json',
    *[b'{"type":"tool_call","tool":"sh","args":{"cmd":"make"},"call_id":"r%d"}' % i for i in range(6)],
    b'{"type":"tool_result","output":"' + b"y" * (TEXT_CAP + 10) + b'"}',
    b'{"type":"done","summary":"bye"}',
]


async def stored_rows(home: Path, lines_too: bool) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    daemon = Daemon(Paths(runtime=home / "run", data=home / "data", cache=home / "cache"))
    (home / "data").mkdir(parents=True)
    recorder: Recorder = daemon.recorder
    assert recorder.open()
    encoded: list[int] = []

    def sink_rows(session_id: str, rows: list[Any], events: list[Any], size: int) -> None:
        encoded.extend(event.seq for event in events)
        daemon.router.sink_rows(session_id, rows, events, size)

    session = LiveSession(SessionSpec(id="s1", name="t", command=["agent"]), load_config(env={}),
                          adapters()["native"](), sink=daemon.router.sink, records=recorder,
                          sink_rows=sink_rows if lines_too else None)
    session.pid, session.state = 4321, SessionState.RUNNING
    stdout = session.reader.read_stdout()
    for line in LINES:
        stdout.data_received(line + b"\n")
        assert not stdout.held
    if session.journal.progress_timer is not None:
        session.journal.progress_timer.cancel()
    assert len(encoded) > 60 if lines_too else not encoded  # most lines went the encoded way
    recorder.flush_now()
    assert recorder.store is not None
    rows = [(r["seq"], r["kind"], r["data"]) for r in recorder.store.events("s1", limit=10_000)]
    verdicts = recorder.store.verdicts("s1")
    recorder.close()
    return rows, verdicts


def test_a_session_stores_the_same_rows_with_lines_encoded_from_their_records(tmp_path: Path) -> None:
    before, verdicts_before = asyncio.run(stored_rows(tmp_path / "dicts", False))
    after, verdicts_after = asyncio.run(stored_rows(tmp_path / "lines", True))
    assert len(after) == len(LINES) and [r[0] for r in after] == list(range(1, len(LINES) + 1))
    assert same([list(r) for r in after], [list(r) for r in before])
    assert verdicts_before and [v["rule"] for v in verdicts_after] == [v["rule"] for v in verdicts_before]
    assert "[... truncated by loopwarden" in after[-2][2]["output"]  # capped like any other row


def test_a_subscriber_gets_the_record_as_before(tmp_path: Path) -> None:
    async def go() -> list[tuple[str, dict[str, Any]]]:
        home = tmp_path
        daemon = Daemon(Paths(runtime=home / "run", data=home / "data", cache=home / "cache"))
        got: list[tuple[str, dict[str, Any]]] = []

        class Listener:
            def wants(self, session_id: str, is_event: bool) -> bool:
                return True

            def offer(self, message: bytes) -> None:
                decoded = orjson.loads(message)
                got.append((decoded["kind"], decoded["data"]))

        daemon.broadcaster.subscribers.append(Listener())  # type: ignore[arg-type]
        event = protocol.parse_line(LINES[1], 2)
        record = typed.decode_record(LINES[1])
        data = typed.stored_json(record, event)
        assert data is not None
        row = ("s1", 2, 1795569172.5, "tool_call", data.decode())
        daemon.router.sink_rows("s1", [row], [event], len(LINES[1]))
        assert daemon.recorder.lanes["s1"][0][1:3] == ("rows", [row])
        return got

    assert asyncio.run(go()) == [("event", {**protocol.parse_line(LINES[1], 2).to_dict(), "seq": 2})]


def _native_session(tmp_path: Path) -> tuple[LiveSession, Recorder]:
    daemon = Daemon(Paths(runtime=tmp_path / "run", data=tmp_path / "data", cache=tmp_path / "cache"))
    (tmp_path / "data").mkdir(parents=True)
    assert daemon.recorder.open()
    session = LiveSession(SessionSpec(id="s1", name="t", command=["agent"]), load_config(env={}),
                          adapters()["native"](), sink=daemon.router.sink, records=daemon.recorder,
                          sink_rows=daemon.router.sink_rows)
    session.pid, session.state = 4321, SessionState.RUNNING
    return session, daemon.recorder


def test_a_chunks_rows_are_queued_as_one_entry_and_stored_in_order(tmp_path: Path) -> None:
    async def go() -> None:
        session, recorder = _native_session(tmp_path)
        stdout = session.reader.read_stdout()
        stdout.data_received(b'{"type":"hello","name":"t","protocol":1}\n')
        chunk = b"".join(event_line(i, 1000.0 + i).encode() for i in range(12))
        stdout.data_received(chunk)
        if session.journal.progress_timer is not None:
            session.journal.progress_timer.cancel()
        entries = [e for e in recorder.lanes["s1"] if e[1] == "rows"]
        assert [[row[1] for row in e[2]] for e in entries] == [list(range(2, 14))]  # one entry, every line's row
        recorder.flush_now()
        assert recorder.store is not None
        assert [r["seq"] for r in recorder.store.events("s1", limit=100)] == list(range(1, 14))
        recorder.close()

    asyncio.run(go())


def test_a_line_for_the_agent_waits_for_the_rows_of_the_lines_before_it(tmp_path: Path) -> None:
    """Write ahead: a handshake agent's verdict goes out once its call is stored. The call's row waits in the
    session for the chunk's end; the verdict line's mark must still cover it."""
    async def go() -> None:
        session, recorder = _native_session(tmp_path)
        session.writer.ready = anyio.Event()  # as run() sets it; the writer task is not started here
        session.writer.started = True
        stdout = session.reader.read_stdout()
        stdout.data_received(b'{"type":"hello","name":"t","protocol":1,"handshake":true}\n')
        chunk = (b'{"type":"assistant_message","text":"reading"}\n'
                 b'{"type":"tool_call","tool":"read_file","args":{"path":"a.py"},"call_id":"c1"}\n'
                 b'{"type":"assistant_message","text":"waiting"}\n')
        stdout.data_received(chunk)
        if session.journal.progress_timer is not None:
            session.journal.progress_timer.cancel()
        marks = [mark for mark, data in session.writer.out if b'"verdict"' in data]
        assert len(marks) == 1
        holding = [e[0] for e in recorder.lanes["s1"] if e[1] == "rows" and 3 in [row[1] for row in e[2]]]
        assert holding and holding[0] <= marks[0]  # the call's row (seq 3) is queued before the mark was taken
        recorder.close()

    asyncio.run(go())
