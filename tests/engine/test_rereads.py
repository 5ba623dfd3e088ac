"""Re-reads (a Goose fork's REP-003): the same file read again and again at different offsets with
no write to it. 5 reads run; the 6th is blocked; a further read opens a gate."""

from __future__ import annotations

from tests.engine.helpers import Action, Session, call, condensation, config, ok, one, run, summary, user


def reads(n, path="src/app.py", tool="Read", start=0):
    out = []
    for i in range(start, start + n):
        out += [call(tool, {"file_path": path, "offset": 100 * i, "limit": 100}), ok(tool, f"line {i}")]
    return out


def test_sixth_read_at_a_new_offset_is_blocked_then_a_seventh_is_gated():
    verdicts = run(reads(5) + [call("Read", {"file_path": "src/app.py", "offset": 900}),
                               call("Read", {"file_path": "./src/app.py", "offset": 950})])
    assert summary(verdicts) == [("block", "rereads", 11), ("gate", "rereads", 12)]
    block = verdicts[0]
    assert block.evidence["path"] == "src/app.py" and block.evidence["reads"] == 5
    assert "read 'src/app.py' 5 times without changing it" in block.message


def test_near_miss_five_reads_and_a_write_between():
    assert run(reads(5)) == []
    edit = [call("Edit", {"file_path": "src/app.py", "old_string": "a", "new_string": "b"}), ok("Edit")]
    assert run(reads(4) + edit + reads(4, start=4)) == []


def test_other_files_tools_and_editor_commands():
    assert run(reads(4) + reads(4, path="src/other.py") + reads(1)) == []
    view = [call("str_replace_editor", {"command": "view", "path": "/w/a.py", "view_range": [i, i + 9]})
            for i in range(6)]
    assert one(run(view), Action.BLOCK, "rereads").seq == 6
    write = call("str_replace_editor", {"command": "str_replace", "path": "/w/a.py", "old_str": "x", "new_str": "y"})
    assert run(view[:5] + [write] + view[:5]) == []
    mcp = [call("developer__read_file", {"path": "notes.md", "offset": i}) for i in range(6)]
    assert one(run(mcp), Action.BLOCK, "rereads").seq == 6


def test_a_human_turn_resets_and_the_limit_is_a_key():
    assert run(reads(4) + [user()] + reads(4)) == []
    assert summary(run(reads(3), config("rereads.max_reads=2"))) == [("block", "rereads", 5)]
    assert run(reads(20), config("rereads.max_reads=0")) == []


def test_an_identical_read_blocked_by_repetition_is_not_blocked_twice():
    same = []
    for _ in range(6):
        same += [call("Read", {"file_path": "a.py"}), ok("Read", "x")]
    blocks = [v for v in run(same[:-1]) if v.action == Action.BLOCK]
    assert [v.rule for v in blocks] == ["repetition"]


def test_near_miss_reads_spread_out_or_after_a_condensation():
    spread = []
    for i in range(8):
        spread += reads(1, start=i) + [call("Grep", {"pattern": f"p{i}.{j}"}) for j in range(20)]
    assert run(spread) == []
    assert run(reads(4) + [condensation()] + reads(4, start=4)) == []
    assert one(run(spread, config("rereads.window=0")), Action.BLOCK, "rereads")


def test_the_very_same_read_again_is_left_to_the_repetition_rule():
    session = Session()
    for _ in range(9):
        session.feed(call("Read", {"file_path": "a.py"}), ok("Read", "x"))
    assert {v.rule for v in session.verdicts} == {"repetition"}
    assert [c.value for c in session.health.counters() if c.name == "rereads"] == [1]
