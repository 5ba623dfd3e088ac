"""What the keeper holds for a kept agent is bounded in bytes both ways, and nothing stalls on the bound.

Output (KEEP_BYTES a stream): an agent that writes more than that in one burst, or one line longer than that, goes
on: what is read is positioned even when nothing more comes, and the part of an unfinished line the daemon has read
is forgotten once the line's start is stored. A daemon killed inside such a line loses that part, counted, and the
next daemon goes on from the line after it. Input (STDIN_HELD): frames for an agent that does not read wait in the
daemon, which stops the agent past limits.stdin_backlog, as it does for an agent it holds itself."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import psutil

from loopwarden.runtime.kept import KEEP_BYTES
from tests.keeper.test_durable import ended, kept, other_daemon  # noqa: F401 - `kept` is a fixture
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

SPILL_FLOOD = str(AGENTS / "spill_flood.py")
LONG_LINE = str(AGENTS / "long_line.py")
MIB = 1 << 20


def calls(lw: Harness, sid: str) -> list[str]:
    return [e["data"]["call_id"] for e in lw.events(sid) if e["kind"] == "tool_call"]


def test_a_burst_past_what_the_keeper_keeps_then_silence_is_answered(kept: Harness, tmp_path: Path) -> None:  # noqa: F811
    """18 MB of spilled outputs (lines under a MiB) as fast as they are answered, the agent waiting for each
    answer: the position of what was read is stored at the end of each interval even when nothing more comes, so
    the keeper reads on."""
    record = tmp_path / "answers.jsonl"
    count, size = 20, 900_000
    sid = kept.launch(PY, SPILL_FLOOD, str(count), str(size), str(record),
                      sets=("spill.threshold_chars=100000", "limits.max_line_bytes=4MiB"))
    snap = kept.wait_state(sid, "exited", "terminated", timeout=90)
    assert snap["state"] == "exited" and snap["exit_code"] == 0, snap
    assert len(record.read_text().splitlines()) == count
    assert count * size > 2 * KEEP_BYTES


def test_lines_longer_than_the_keeper_keeps_are_read_to_their_end(kept: Harness, tmp_path: Path) -> None:  # noqa: F811
    """Three 25 MB outputs streamed to their spill files, and a 30 MB line past the line limit: every call after
    them is judged and answered, and each agent ends by itself."""
    record = tmp_path / "answers.jsonl"
    size = 25_000_000
    spilled = kept.launch(PY, SPILL_FLOOD, "3", str(size), str(record),
                          sets=("spill.threshold_chars=100000", "limits.max_line_bytes=64MiB"))
    skipped = kept.launch(PY, LONG_LINE, str(30 * MIB), "message")
    for sid in (spilled, skipped):
        snap = kept.wait_state(sid, "exited", "terminated", timeout=120)
        assert snap["state"] == "exited" and snap["exit_code"] == 0, snap
    answers = [json.loads(line) for line in record.read_text().splitlines()]
    assert [Path(a["path"]).stat().st_size for a in answers] == [size] * 3
    assert calls(kept, skipped) == ["c0", "c1"]
    invalid = [e for e in kept.events(skipped) if e["kind"] == "invalid_line"]
    assert len(invalid) == 1 and invalid[0]["seq"] == 3


def test_a_daemon_killed_inside_a_long_line_loses_only_that_line_and_says_so(kept: Harness) -> None:  # noqa: F811
    """SIGKILL while a 48 MiB line comes (after more of it than the keeper keeps): the next daemon passes over the
    rest of that line as one over-long line numbered as it was, judges and answers the call after it, and counts
    the bytes it never saw."""
    sid = kept.launch(PY, LONG_LINE, str(48 * MIB), "message", "12")
    pid = kept.wait_state(sid, "running")["pid"]

    def written() -> int:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
        return 0

    wait_for(lambda: written() > KEEP_BYTES + 4 * MIB, 60, "more of the line than the keeper keeps")
    assert kept.daemon is not None
    old = kept.daemon.pid
    os.kill(old, signal.SIGKILL)
    kept.daemon.wait()
    other_daemon(kept, old)
    snap = ended(kept, [sid])[sid]
    assert snap["state"] == "exited" and snap["exit_code"] == 0, snap
    events = [e for e in kept.events(sid) if e["kind"] != "log"]
    assert calls(kept, sid) == ["c0", "c1"]
    assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})  # none twice
    invalid = [e for e in events if e["kind"] == "invalid_line"]
    assert [e["seq"] for e in invalid] == [3]
    keeper = kept.request("ping")["keeper"]
    assert keeper["taken_up"] == 1 and keeper["lost_bytes"] > 0


def test_an_agent_that_never_reads_its_input_is_stopped_and_the_keeper_stays_small(kept: Harness) -> None:  # noqa: F811
    """A handshake agent that never reads stdin while nudges pile up for it: the keeper holds at most STDIN_HELD of
    them, the rest wait in the daemon, which stops the agent with its reason."""
    keeper = psutil.Process(kept.request("ping")["keeper"]["pid"])
    before = keeper.memory_info().rss
    sid = kept.launch(PY, str(AGENTS / "deaf_handshake.py"), name="deaf")
    snap = kept.wait_state(sid, "terminated", timeout=60)
    assert snap["termination"] == "validation_failure"
    assert "stopped reading its input" in snap["termination_text"]
    assert keeper.memory_info().rss - before < 16 * MIB
