"""Tests for the SQLite store, on real files in tmp_path."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from loopwarden.runtime import store as store_mod
from loopwarden.runtime import store_rows
from loopwarden.supervisor.gates import GateBook
from loopwarden.runtime.store import SCHEMA_VERSION, TABLES, Batch, Store, StoreError
from loopwarden.supervisor.verdicts import Action, Termination, Verdict
from tests.store.helpers import mode
from tests.support.nesting import depth_of, nest

NOW = 1_700_000_000.0


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path / "store.db")
    yield s
    s.close()


def session(sid: str = "s1", **extra) -> dict:
    return {"id": sid, "name": f"agent {sid}", "adapter": "native", "command": ["agent", "--fast"],
            "cwd": "/work", "state": "running", "created_at": NOW, **extra}


def event(sid: str = "s1", seq: int = 1, **data) -> dict:
    return {"session_id": sid, "seq": seq, "ts": NOW + seq, "kind": "tool_result",
            "data": {"type": "tool_result", "output": "ok", **data}}


def full_batch(sid: str = "s1") -> Batch:
    return Batch(
        sessions_upsert=[session(sid)],
        events=[event(sid, 1), event(sid, 2)],
        verdicts=[{"session_id": sid, "ts": NOW, **Verdict(Action.BLOCK, "repetition", "same call 3x",
                                                            seq=2, evidence={"calls": [1, 2]}).to_dict()}],
        gates_upsert=[{"session_id": sid, "gate_id": "g1", "rule": "loop", "reason": "stuck",
                       "opened_at": NOW, "seq": 2, "evidence": {"failures": 3}}],
        actions=[{"ts": NOW, "actor": "uid 1000 (alice)", "client": "cli pid 1234", "session_id": sid,
                  "action": "approve", "target": "g1", "note": "try the other parser", "outcome": "ok"}],
        spills=[{"session_id": sid, "seq": 2, "ts": NOW, "tool": "bash", "path": "/tmp/x.txt", "size": 9}],
    )


def counts(s: Store) -> dict[str, int]:
    return {t: s.count(t) for t in TABLES}


def raw_version(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]


# ---- schema, pragmas, files ----------------------------------------------------

def test_new_store_has_every_table_and_the_schema_version(store, tmp_path):
    db = Database(tmp_path / "store.db")
    assert set(TABLES) | {"meta"} <= set(db.table_names())
    assert store.schema_version == SCHEMA_VERSION == len(store_mod.MIGRATIONS)
    assert raw_version(tmp_path / "store.db") == str(SCHEMA_VERSION)
    assert db["gates"].pks == ["session_id", "gate_id"]
    assert {"task", "agent", "model", "env_keys", "dropped_events", "handshake"} <= set(db["sessions"].columns_dict)
    assert "env" not in db["sessions"].columns_dict
    indexes = {ix.name: ix.columns for t in TABLES for ix in db[t].indexes}
    assert "events_by_session" not in indexes  # since version 3 a session's events are found through its runs
    assert db["event_runs"].indexes[0].columns == ["session_id", "last_id"]
    assert indexes["verdicts_by_session"] == ["session_id", "id"]


def test_wal_mode_and_synchronous_normal(store, tmp_path):
    with sqlite3.connect(tmp_path / "store.db") as other:  # journal_mode=wal persists in the file
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_file_modes_0600_and_created_directory_0700(tmp_path, umask):
    path = tmp_path / "a" / "b" / "store.db"
    s = Store.open(path)
    s.write(full_batch())
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        assert mode(path.parent / name) == 0o600, name
    assert mode(path.parent) == 0o700
    s.close()
    s = Store.open(path)  # reopened: -wal and -shm are created afresh
    s.write(full_batch("s2"))
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        assert mode(path.parent / name) == 0o600, name
    s.close()


def test_an_existing_file_is_tightened_and_an_existing_directory_left_alone(tmp_path, umask):
    tmp_path.chmod(0o755)
    path = tmp_path / "store.db"
    path.touch(mode=0o644)
    Store.open(path).close()
    assert mode(path) == 0o600
    assert mode(tmp_path) == 0o755


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path):
    path = tmp_path / "store.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        Store.open(path)


# ---- migrations ------------------------------------------------------------------

def test_a_version_0_file_made_by_hand_is_migrated_and_keeps_its_other_tables(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")  # meta without a version
    conn.close()
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        s.write(full_batch())
        assert counts(s)["events"] == 2
    assert raw_version(path) == str(SCHEMA_VERSION)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT text FROM notes").fetchall() == [("keep me",)]
    conn.close()


def test_a_file_is_migrated_to_a_newer_schema_with_its_data(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    known = len(store_mod.MIGRATIONS)
    with Store.open(path) as s:
        assert s.schema_version == known
        s.write(full_batch())

    def next_add_column(db: Database) -> None:
        db["sessions"].add_column("budget_usd", float)
        db["spills"].create_index(["path"], index_name="spills_by_path")

    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, next_add_column])
    with Store.open(path) as s:
        assert s.schema_version == known + 1
        assert s.session("s1")["name"] == "agent s1"
        assert s.session("s1")["budget_usd"] is None
        assert counts(s) == {"sessions": 1, "events": 2, "verdicts": 1, "gates": 1, "actions": 1, "spills": 1}
        s.write(Batch(sessions_upsert=[{"id": "s1", "budget_usd": 2.5}]))  # the new column is writable
        assert s.session("s1")["budget_usd"] == 2.5
    assert raw_version(path) == str(known + 1)


def test_a_version_1_file_gets_the_principal_columns_and_keeps_its_audit_rows(tmp_path, monkeypatch):
    path = tmp_path / "v1.db"
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:1])
    with Store.open(path) as s:
        s.write(full_batch())
    assert raw_version(path) == "1"
    monkeypatch.undo()
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        [old] = s.actions()
        assert old["actor"] and old["pid"] is None and old["inside_session"] is None
        s.write(Batch(actions=[{"ts": NOW, "actor": "uid 1000 (alice)", "client": "cli pid 42", "action": "kill",
                                "client_kind": "cli", "pid": 42, "uid": 1000, "user": "alice", "tty": "pts/3",
                                "inside_session": "s3", "outcome": "refused: pid 42 runs inside session s3"}]))
        new = s.actions()[-1]
        assert (new["client_kind"], new["pid"], new["uid"], new["user"], new["tty"], new["inside_session"]) == (
            "cli", 42, 1000, "alice", "pts/3", "s3")
    assert raw_version(path) == str(SCHEMA_VERSION)


def test_a_failing_migration_changes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    known = len(store_mod.MIGRATIONS)
    with Store.open(path) as s:
        s.write(full_batch())

    def next_half_done(db: Database) -> None:
        db.create_table("extra", {"x": int})
        db["sessions"].add_column("budget_usd", float)
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, next_half_done])
    with pytest.raises(StoreError, match=rf"migration {known + 1} \(next_half_done\) failed, nothing changed: "
                                         "disk on fire"):
        Store.open(path)
    db = Database(path)
    assert "extra" not in db.table_names()
    assert "budget_usd" not in db["sessions"].columns_dict
    assert raw_version(path) == str(known)
    monkeypatch.undo()
    with Store.open(path) as s:  # the code that knows the older version still opens it
        assert counts(s)["events"] == 2


def test_a_file_from_a_newer_loopwarden_is_refused(tmp_path):
    path = tmp_path / "new.db"
    Store.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(StoreError) as err:
        Store.open(path)
    assert str(err.value) == f"{path} was written by a newer loopwarden (schema 99 > {SCHEMA_VERSION})"
    assert raw_version(path) == "99"


def test_the_prepared_columns_are_the_tables_columns(store):
    """The writer accepts exactly the columns the file has (so a migration's new column is writable)."""
    db = store.db
    for table in TABLES:
        assert set(store._kinds[table]) == set(db[table].columns_dict)
    assert store._kinds["sessions"]["command"] == "json"
    assert store._kinds["sessions"]["handshake"] == "bool"
    assert store._kinds["events"]["seq"] == "value"
    assert store._kinds["events"]["kind"] == "text"


# ---- writing: batches are atomic -----------------------------------------------

BAD_ROWS = {
    "gate without its primary key": lambda b: b.gates_upsert.append({"session_id": "s1", "rule": "x"}),
    "verdict without its action (NOT NULL)": lambda b: b.verdicts.append({"session_id": "s1", "rule": "x"}),
    "event with a value SQLite cannot bind": lambda b: b.events.append({**event(), "seq": {"a": 1}}),
    "action with an unknown column": lambda b: b.actions.append({"ts": NOW, "actor": "me", "action": "x",
                                                                "colour": "red"}),
    "spill with an int beyond 64 bits": lambda b: b.spills.append({"session_id": "s1", "path": "/p",
                                                                   "size": 2**70}),
    "event that sets its own id": lambda b: b.events.append({**event(), "id": 7}),
}


@pytest.mark.parametrize("spoil", BAD_ROWS.values(), ids=BAD_ROWS.keys())
def test_a_batch_with_a_bad_row_writes_nothing_and_the_store_stays_usable(store, spoil):
    store.write(full_batch("s0"))
    before = counts(store)
    batch = full_batch("s1")
    spoil(batch)
    with pytest.raises(StoreError):
        store.write(batch)
    assert counts(store) == before
    assert store.session("s1") is None
    assert not store.db.conn.in_transaction
    store.write(full_batch("s2"))
    assert counts(store)["events"] == before["events"] + 2


def test_a_refused_batch_is_gone_from_the_file_too(tmp_path):
    path = tmp_path / "store.db"
    with Store.open(path) as s:
        bad = full_batch("s1")
        bad.gates_upsert.append({"session_id": "s1"})
        with pytest.raises(StoreError, match="gates row without gate_id"):
            s.write(bad)
    with Store.open(path) as s:
        assert counts(s) == dict.fromkeys(TABLES, 0)


def test_an_empty_batch_is_a_no_op(store):
    changes = store.db.conn.total_changes
    store.write(Batch())
    assert not Batch() and len(full_batch()) == 7
    assert store.db.conn.total_changes == changes
    assert not store.db.conn.in_transaction


# ---- reading -------------------------------------------------------------------

def test_reads_decode_json_columns(store):
    store.write(Batch(sessions_upsert=[session(config={"limits": {"max_runtime": 600}}, handshake=True)]))
    store.write(full_batch())
    s = store.session("s1")
    assert s["command"] == ["agent", "--fast"]
    assert s["config"] == {"limits": {"max_runtime": 600}}
    assert s["handshake"] is True
    assert s["dropped_events"] == 0
    assert [e["data"] for e in store.events("s1")] == [{"type": "tool_result", "output": "ok"}] * 2
    (v,) = store.verdicts("s1")
    assert (v["action"], v["rule"], v["seq"], v["evidence"]) == ("block", "repetition", 2, {"calls": [1, 2]})
    assert store.gates()[0]["evidence"] == {"failures": 3}
    assert store.actions()[0]["note"] == "try the other parser"
    assert store.spills("s1")[0]["path"] == "/tmp/x.txt"


def test_events_and_verdicts_page_by_id(store):
    store.write(Batch(events=[event("s1", i) for i in range(1, 11)] + [event("s2", 99)]))
    first = store.events("s1", limit=4)
    assert [e["seq"] for e in first] == [1, 2, 3, 4]
    rest = store.events("s1", after_id=first[-1]["id"])
    assert [e["seq"] for e in rest] == [5, 6, 7, 8, 9, 10]
    assert store.events("s1", after_id=rest[-1]["id"]) == []
    assert store.count("events") == 11 and store.count("events", "s1") == 10
    assert store.verdicts("s1") == []


def test_gates_filter_by_session_and_status(store):
    store.write(full_batch("s1"))
    store.write(full_batch("s2"))
    store.write(Batch(gates_upsert=[{"session_id": "s2", "gate_id": "g1", "status": "approved"}]))
    assert [(g["session_id"], g["status"]) for g in store.gates()] == [("s1", "pending"), ("s2", "approved")]
    assert [g["session_id"] for g in store.gates(status="pending")] == ["s1"]
    assert store.gates("s2", "pending") == []
    assert len(store.gates("s2")) == 1


def test_actions_are_the_latest_oldest_first(store):
    store.write(Batch(actions=[{"ts": NOW + i, "actor": "uid 1000 (alice)", "client": "console",
                                "session_id": f"s{i % 2}", "action": f"a{i}"} for i in range(10)]))
    assert [a["action"] for a in store.actions(limit=3)] == ["a7", "a8", "a9"]
    assert [a["action"] for a in store.actions("s0")] == ["a0", "a2", "a4", "a6", "a8"]
    assert store.count("actions", "s1") == 5
    with pytest.raises(ValueError):
        store.count("sqlite_master")


def test_sessions_upsert_updates_in_place(store):
    store.write(Batch(sessions_upsert=[session(env={"PATH": "/bin"}, preset="careful")]))
    store.write(Batch(sessions_upsert=[{"id": "s1", "state": "exited", "exit_code": 0, "ended_at": NOW + 5,
                                        "termination": Termination.EXITED, "dropped_events": 3}]))
    (s,) = store.sessions()
    assert (s["name"], s["preset"], s["env_keys"], s["cwd"]) == ("agent s1", "careful", ["PATH"], "/work")
    assert (s["state"], s["exit_code"], s["ended_at"], s["termination"], s["dropped_events"]) == \
        ("exited", 0, NOW + 5, "exited", 3)
    store.write(Batch(sessions_upsert=[{"id": "s1"}]))  # only the key: nothing changes
    assert store.sessions() == [s]


def test_gates_upsert_updates_in_place_and_takes_gate_to_dict(store):
    book = GateBook()
    gate = book.open("loop", "three failures in a row", {"errors": ["E1", "E2"]}, seq=7, now=NOW)
    store.write(Batch(gates_upsert=[{"session_id": "s1", **gate.to_dict()}]))
    book.decide(gate.id, "approved", NOW + 60, by="uid 1000 (alice)", note="use the fallback")
    store.write(Batch(gates_upsert=[{"session_id": "s1", **gate.to_dict()}]))
    (g,) = store.gates()
    assert g == {"session_id": "s1", "gate_id": "g1", "rule": "loop", "reason": "three failures in a row",
                 "opened_at": NOW, "seq": 7, "evidence": {"errors": ["E1", "E2"]}, "status": "approved",
                 "decided_at": NOW + 60, "decided_by": "uid 1000 (alice)", "note": "use the fallback"}


def test_mark_lost_marks_every_session_not_in_a_final_state(store):
    states = {"a": "running", "b": "exited", "c": "gated", "d": "terminated", "e": "lost", "f": None,
              "g": "starting"}
    store.write(Batch(sessions_upsert=[{"id": sid, "state": st_, "created_at": NOW + i}
                                       for i, (sid, st_) in enumerate(states.items())]))
    assert store.mark_lost(NOW + 100) == ["a", "c", "f", "g"]
    by_id = {s["id"]: s for s in store.sessions()}
    for sid in ("a", "c", "f", "g"):
        assert (by_id[sid]["state"], by_id[sid]["termination"], by_id[sid]["ended_at"]) == \
            ("lost", "lost", NOW + 100)
        assert by_id[sid]["termination_text"] == store_mod.LOST_TEXT
    assert by_id["b"]["state"] == "exited" and by_id["b"]["ended_at"] is None
    assert store.mark_lost(NOW + 200) == []


def test_unended_sessions_in_pods_are_read_and_marked_lost_one_by_one_of_only_those_named(store):
    """What a next daemon does with an earlier one's sessions in pods: it reads the unended ones placed on a node,
    keeps them from the mark, and marks lost later only those it could not take up."""
    on_node = {"pod": "lw-s1-1a2b3c", "node": "node1", "image": "py3:1"}
    rows = {"a": ("running", {"pod": on_node, "name": "a"}), "b": ("exited", {"pod": on_node}),
            "c": ("gated", {"pod": {**on_node, "pod": "lw-s3-1a2b3c"}}), "d": ("lost", {"pod": on_node}),
            "e": ("starting", {"pod": {**on_node, "node": None}}), "f": ("running", {"name": "here"}),
            "g": ("running", None)}
    store.write(Batch(sessions_upsert=[{"id": sid, "state": st_, "created_at": NOW + i, "snapshot": snap}
                                       for i, (sid, (st_, snap)) in enumerate(rows.items())]))
    assert store.unended_in_pods() == [{"id": "a", "snapshot": {"pod": on_node}},
                                       {"id": "c", "snapshot": {"pod": {**on_node, "pod": "lw-s3-1a2b3c"}}}]
    assert store.mark_lost(NOW + 100, keep={"a", "c", "e", "f", "g"}) == []
    assert store.mark_lost(NOW + 200, only=["c", "b", "d"]) == ["c"]  # the final ones are left as they are
    assert [row["id"] for row in store.unended_in_pods()] == ["a"]
    assert {s["id"]: s["state"] for s in store.sessions()} == {
        "a": "running", "b": "exited", "c": "lost", "d": "lost", "e": "starting", "f": "running", "g": "running"}


def test_reads_from_another_thread(store):
    store.write(full_batch())
    seen = []
    thread = threading.Thread(target=lambda: seen.append(store.count("events")))
    thread.start()
    thread.join()
    assert seen == [2]


# ---- robustness ------------------------------------------------------------------

def test_env_values_are_never_stored(tmp_path):
    path = tmp_path / "store.db"
    secret = "sk-live-DO-NOT-STORE-0123456789"
    with Store.open(path) as s:
        s.write(Batch(sessions_upsert=[session(env={"API_KEY": secret, "HOME": "/home/alice"})]))
        s.write(Batch(sessions_upsert=[session("s2", env_keys={"TOKEN": secret})]))
        s.write(Batch(sessions_upsert=[session("s3", env_keys=["B", "A"], env={"A": secret})]))
        assert s.session("s1")["env_keys"] == ["API_KEY", "HOME"]
        assert s.session("s2")["env_keys"] == ["TOKEN"]
        assert s.session("s3")["env_keys"] == ["A", "B"]
        open_files = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # file, -wal and -shm
    assert secret.encode() not in open_files
    assert secret.encode() not in (tmp_path / "store.db").read_bytes()  # checkpointed on close


def test_lone_surrogates_are_replaced_not_fatal(store):
    bad = "caf\udce9 \ud800"
    store.write(Batch(
        sessions_upsert=[session(name=bad, command=["run", bad])],
        events=[event(output=bad, **{"key\udc80": [bad]})],
        verdicts=[{"session_id": "s1", "action": "nudge", "reason": bad, "evidence": {"x": bad}}],
        actions=[{"ts": NOW, "actor": "uid 1000", "action": "note", "note": bad}],
    ))
    assert store.session("s1")["name"] == "caf? ?"
    assert store.session("s1")["command"] == ["run", "caf? ?"]
    data = store.events("s1")[0]["data"]
    assert data["output"] == "caf? ?" and data["key?"] == ["caf? ?"]
    assert store.verdicts("s1")[0]["reason"] == "caf? ?"
    assert store.actions()[0]["note"] == "caf? ?"
    store.write(Batch(events=[event(output="ünïcödé ✓ 🚀")]))  # valid text is kept exactly
    assert store.events("s1")[-1]["data"]["output"] == "ünïcödé ✓ 🚀"


def test_a_huge_output_is_stored_truncated_with_a_marker(tmp_path):
    with Store.open(tmp_path / "store.db", text_cap=1000) as s:
        huge = "x" * 5_000_000
        s.write(Batch(events=[event(output=huge, tool="bash")],
                      verdicts=[{"session_id": "s1", "action": "spill", "message": "y" * 5000}]))
        data = s.events("s1")[0]["data"]
        assert data["output"].startswith("x" * 1000)
        assert "truncated by loopwarden: 1,000 of 5,000,000 characters kept" in data["output"]
        assert len(data["output"]) < 1100
        assert (data["tool"], data["type"]) == ("bash", "tool_result")
        assert len(s.verdicts("s1")[0]["message"]) < 1100
    with Store.open(tmp_path / "default.db") as s:  # the default cap is 64 KiB of text
        s.write(Batch(events=[event(output="z" * 5_000_000)]))
        output = s.events("s1")[0]["data"]["output"]
        assert output.startswith("z" * 65536) and not output.startswith("z" * 65537)


def test_a_huge_document_of_small_parts_becomes_a_stub(tmp_path):
    with Store.open(tmp_path / "store.db", text_cap=1000, json_cap=10_000) as s:
        s.write(Batch(events=[event(files=[f"src/file_{i}.py" for i in range(100_000)])]))
        data = s.events("s1")[0]["data"]
        assert data["truncated"] is True and data["chars"] > 10_000
        assert data["preview"].startswith('{"type"') and len(data["preview"]) == 1000


def test_values_json_cannot_hold_are_stored_as_text(store):
    class Odd:
        def __str__(self) -> str:
            return "odd"

    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no")

    cyclic: list = []
    cyclic.append(cyclic)
    store.write(Batch(events=[
        event(thing=Odd(), raw=b"\x00\xff", tags={"a"}, big=2**80, nan=float("nan"), when=Action.GATE),
        event(seq=2, nested={(1, 2): "tuple key", 3: "int key"}, broken=Broken()),
        event(seq=3, cyclic=cyclic),
        {"session_id": "s1", "kind": "weird", "data": Termination.LOST},
    ]))
    first, second, third, fourth = (e["data"] for e in store.events("s1"))
    assert (first["thing"], first["raw"], first["tags"]) == ("odd", "b'\\x00\\xff'", "{'a'}")
    assert (first["big"], first["nan"], first["when"]) == (2**80, None, "gate")
    assert second["nested"] == {"(1, 2)": "tuple key", "3": "int key"}
    assert second["broken"] == "<unprintable Broken>"
    assert json.dumps(third)  # cut off at some depth, but stored and valid
    assert fourth == "lost"


_chars = st.characters(exclude_categories=()) | st.sampled_from(["\ud800", "\udc80", "\udfff", "\x00"])
_text = st.text(_chars, max_size=80)
_json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(_chars, max_size=5), inner, max_size=4),
    max_leaves=20,
)


def test_any_data_can_be_written_and_read_back_as_json(tmp_path):
    with Store.open(tmp_path / "store.db", text_cap=50) as s:
        @settings(max_examples=150, deadline=None)
        @given(data=_json_like, text=_text)
        def check(data, text):
            s.write(Batch(events=[{"session_id": "h", "kind": text, "data": data}],
                          actions=[{"ts": NOW, "actor": text, "action": "x", "note": text}]))
            (row,) = s.events("h", after_id=s.count("events") - 1)
            json.dumps(row["data"], allow_nan=False)
            row["kind"].encode("utf-8")

        check()


@pytest.mark.parametrize("depth", [64, 249, 250, 251, 254, 255, 1023, 1024, 5000])
def test_a_record_is_stored_whole_up_to_the_record_bound_and_cut_below_it(store, depth):
    from loopwarden.supervisor.bounds import MAX_RECORD_DEPTH, cut_marker

    store.write(Batch(events=[event(deep=nest(depth - 1))]))  # the data (1) > deep (2...)
    [row] = store.events("s1")
    assert depth_of(row["data"]) == min(depth, MAX_RECORD_DEPTH)
    assert (cut_marker(MAX_RECORD_DEPTH) in json.dumps(row["data"])) is (depth > MAX_RECORD_DEPTH)
    assert row["data"]["output"] == "ok"


def test_an_encoded_event_row_past_the_text_cap_is_capped_as_a_dict_row_would_be(tmp_path: Path) -> None:
    with Store.open(tmp_path / "lw.db", text_cap=100) as store:
        text = "y" * 150
        encoded = orjson.dumps({"type": "output", "text": text, "seq": 1}).decode()
        store.write(Batch(events=[("s1", 1, 1.0, "output", encoded),
                                  {"session_id": "s1", "seq": 2, "ts": 2.0, "kind": "output",
                                   "data": {"type": "output", "text": text, "seq": 2}},
                                  ("s1", 3, 3.0, "output", '{"type":"output","text":"short","seq":3}')]))
        rows = store.events("s1")
        assert [r["seq"] for r in rows] == [1, 2, 3]
        capped = rows[0]["data"]["text"]
        assert capped == rows[1]["data"]["text"] != text and capped.startswith("y" * 100)
        assert rows[2]["data"] == {"type": "output", "text": "short", "seq": 3}


@pytest.mark.parametrize("bad_at", [None, 5, store_rows._ROWS_PER_INSERT * 2 + 30])
def test_a_large_batch_of_events_keeps_its_order_and_is_refused_whole(tmp_path: Path, bad_at: int | None) -> None:
    """Event rows go in by statements of many rows (and the rest one by one): ids follow the batch's order, every
    kind of row takes the same way, and a bad row anywhere refuses all of them."""
    n = store_rows._ROWS_PER_INSERT * 2 + 37
    rows: list = []
    for i in range(n):
        sid = f"s{i % 3}"
        if i % 4 == 0:
            rows.append(event(sid, i, output=f"dict {i}"))
        else:
            rows.append((sid, i, NOW + i, "tool_result", orjson.dumps({"type": "tool_result", "seq": i}).decode()))
    if bad_at is not None:
        rows[bad_at] = (f"s{bad_at % 3}", bad_at, NOW, None, "{}")  # kind is NOT NULL
    with Store.open(tmp_path / "lw.db") as store:
        if bad_at is not None:
            with pytest.raises(StoreError):
                store.write(Batch(events=rows))
            assert store.count("events") == 0 and not store.db.conn.in_transaction
            return
        store.write(Batch(events=rows))
        got = list(store.db.execute("SELECT id, session_id, seq FROM events ORDER BY id"))
        assert [(sid, seq) for _, sid, seq in got] == [(f"s{i % 3}", i) for i in range(n)]
        assert [rid for rid, _, _ in got] == list(range(1, n + 1))
        assert [e["seq"] for e in store.events("s1")] == list(range(1, n, 3))
        assert store.events("s0")[1]["data"] == {"type": "tool_result", "seq": 3}
        assert store.events("s0")[0]["data"] == {"type": "tool_result", "output": "dict 0"}


def _old_reads(path: Path, sids: list[str]) -> dict:
    """A session's events as a version-2 file answers them, by the queries of that version (the index)."""
    out = {}
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        for sid in sids:
            rows = [dict(r) for r in conn.execute("SELECT * FROM events WHERE session_id = ? ORDER BY id", [sid])]
            out[sid] = rows
    conn.close()
    return out


def _event_batches(sids: list[str], rounds: int) -> list[Batch]:
    """Rounds of events of several sessions, interleaved within and across batches (some sessions skip rounds)."""
    batches, seq = [], dict.fromkeys(sids, 0)
    for r in range(rounds):
        rows: list = []
        for k, sid in enumerate(sids):
            if (r + k) % 3 == 2:
                continue
            for n in range(1 + (r * 7 + k) % 5):
                seq[sid] += 1
                rows.append(event(sid, seq[sid], output=f"{sid} {seq[sid]}") if seq[sid] % 2 else
                            (sid, seq[sid], NOW + seq[sid], "tool_result",
                             orjson.dumps({"type": "tool_result", "output": f"{sid} {seq[sid]}"}).decode()))
                if n == 0 and r % 4 == 1:  # a session's rows split by another's within one batch
                    rows.append(event("s8", r * 10 + k))
        batches.append(Batch(events=rows, verdicts=[{"session_id": sids[r % len(sids)], "ts": NOW + r,
                                                     "action": "nudge"}]))
    return batches


def test_a_version_2_file_gets_event_runs_and_reads_the_same(tmp_path: Path, monkeypatch) -> None:
    """A file written before event runs (events indexed by session) opens with them: every session's events read
    the same by every way of reading them, and new events join them."""
    path = tmp_path / "v2.db"
    sids = ["s1", "s2", "s3", "s9"]  # and s8, whose rows split theirs
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:2])
    with Store.open(path) as s:
        assert s.schema_version == 2
        for batch in _event_batches(sids, 30):
            s.write(batch)
        s.write(Batch(sessions_upsert=[session(sid, state="exited", ended_at=NOW) for sid in sids[:2]]))
    assert raw_version(path) == "2"
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM events WHERE session_id = 's2'")  # a pruned session leaves gaps in the ids
    conn.close()
    old = _old_reads(path, [*sids, "s8"])
    assert all(old[sid] for sid in ("s1", "s3", "s8", "s9")) and not old["s2"]
    monkeypatch.undo()
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        for sid in [*sids, "s8"]:
            want = [{**row, "data": orjson.loads(row["data"])} for row in old[sid]]
            assert s.events(sid, limit=10_000) == want
            assert s.count("events", sid) == len(want)
            assert s.last("events", sid, 7) == want[-7:]
            paged, after = [], 0
            while page := s.events(sid, after_id=after, limit=4):
                paged += page
                after = page[-1]["id"]
            assert paged == want
            for n in (0, 1, 5, len(want)):
                assert s.newest_start(sid, "events", n) == (want[-n - 1]["id"] if n < len(want) else 0)
            rows, _ = s.newest(sid, limit=10, max_bytes=1 << 20, tables=["events"])
            assert rows["events"] == want[-10:]
            history, _, _ = s.history(sid, {}, limit=10_000, max_bytes=1 << 30, tables=["events"])
            assert history["events"] == want
        before = s.count("events", "s1")
        s.write(Batch(events=[event("s1", 1000), event("s4", 1), event("s1", 1001)]))
        assert [e["seq"] for e in s.events("s1", limit=10_000)][-3:] == [old["s1"][-1]["seq"], 1000, 1001]
        assert s.count("events", "s1") == before + 2 and [e["seq"] for e in s.events("s4")] == [1]
        assert s.prunable(NOW + 1)["events"] == before + 2
        assert s.prune(NOW + 1)["events"] == before + 2
        assert s.events("s1") == [] and s.count("events", "s1") == 0
        assert s.events("s3", limit=10_000) == [{**row, "data": orjson.loads(row["data"])} for row in old["s3"]]
        assert s.db.execute("SELECT count(*) FROM event_runs WHERE session_id = 's1'").fetchone()[0] == 0


@pytest.mark.parametrize("query", ["events", "last", "newest_start", "history", "count", "prune"])
def test_a_sessions_events_are_read_without_a_scan_or_a_sort(store: Store, query: str) -> None:
    """Every read of one session's events searches its runs, then the rows by id: no table scan, no sort."""
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    try:
        if query == "events":
            store.events("s1", after_id=3)
        elif query == "last":
            store.last("events", "s1", 5)
        elif query == "newest_start":
            store.newest_start("s1", "events", 5)
        elif query == "history":
            store.history("s1", {"events": 2}, limit=10, max_bytes=1 << 20, tables=["events"])
        elif query == "count":
            store.count("events", "s1")
        else:
            store.write(Batch(sessions_upsert=[session("s1", state="exited", ended_at=NOW)]))
            store.prune(NOW + 1)
    finally:
        store.db.conn.set_trace_callback(None)
    reads = [sql for sql in seen if "events" in sql and not sql.startswith(("BEGIN", "COMMIT"))]
    assert reads
    for sql in reads:
        plan = " | ".join(row[3] for row in store.db.execute(f"EXPLAIN QUERY PLAN {sql}"))
        assert "TEMP B-TREE" not in plan and "SCAN e" not in plan and "SCAN events" not in plan, (sql, plan)


def test_a_version_3_file_gets_the_lost_column_and_a_lost_session_says_how_it_ended(
        tmp_path: Path, monkeypatch) -> None:
    """A version 3 file opens at the current version: its sessions read lost None, a session an earlier
    daemon left running is marked lost, then told how it ended (only while it is lost)."""
    path = tmp_path / "v3.db"
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:3])
    with Store.open(path) as s:
        s.write(full_batch("s1"))
        s.write(Batch(sessions_upsert=[session("s2", state="exited", ended_at=NOW)]))
    assert raw_version(path) == "3"
    monkeypatch.undo()
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 4
        assert s.session("s1")["lost"] is None and s.count("events", "s1") == 2
        assert s.mark_lost(NOW + 10) == ["s1"]
        assert s.session("s1")["termination_text"] == store_mod.LOST_TEXT
        how = {"how": "guardian", "daemon_died_at": NOW + 5, "unread_stdout": 512}
        assert s.record_lost("s1", "killed by the guardian when the daemon died", how, ended_at=NOW + 5)
        assert not s.record_lost("s2", "never", {"how": "gone"})  # not lost: left as it ended
        row = s.session("s1")
        assert (row["state"], row["termination_text"], row["lost"], row["ended_at"]) == (
            "lost", "killed by the guardian when the daemon died", how, NOW + 5)
        assert s.session("s2")["lost"] is None and s.session("s2")["termination_text"] is None
    with Store.open(path) as s:  # and it stays so
        assert s.session("s1")["lost"] == how
    assert raw_version(path) == str(SCHEMA_VERSION)


def test_a_version_4_file_gets_the_conversation_column_and_keeps_its_sessions(tmp_path: Path, monkeypatch) -> None:
    """A version 4 file opens at the current version: its sessions read conversation None, and a session
    written after stores its agent's conversation id and launch settings."""
    path = tmp_path / "v4.db"
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:4])
    with Store.open(path) as s:
        s.write(full_batch("s1"))
    monkeypatch.undo()
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert s.session("s1")["conversation"] is None and s.count("events", "s1") == 2
        s.write(Batch(sessions_upsert=[session("s2", conversation="c-123", config={"limits.max_runtime": 300.0})]))
        row = s.session("s2")
        assert (row["conversation"], row["config"]) == ("c-123", {"limits.max_runtime": 300.0})
    assert raw_version(path) == str(SCHEMA_VERSION)
