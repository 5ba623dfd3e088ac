"""The session detail screen, driven by Textual's Pilot, against a real daemon with scripted sessions."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.app import App
from textual.widgets import Log, RichLog

from loopwarden.runtime.client import DaemonError
from loopwarden.paths import default_paths
from loopwarden.widgets.detail import MAX_LINES, SessionDetail
from loopwarden.supervisor import messages
from loopwarden.widgets.health import HealthPanel, health_view
from loopwarden.widgets.proctree import ProcessTree
from loopwarden.widgets.spill_viewer import SpillViewer
from loopwarden.widgets.stream import render
from tests.console.helpers import until
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PATH_TO_PY, PY, PY_NAME
from tests.support.waiting import wait_for


class DetailApp(App[None]):
    """Just the detail screen, as the console pushes it."""

    def __init__(self, detail: SessionDetail) -> None:
        super().__init__()
        self.detail = detail

    def on_mount(self) -> None:
        self.push_screen(self.detail)


def stream_lines(detail: SessionDetail) -> list[str]:
    """The stream as drawn (the RichLog's rendered lines)."""
    return [strip.text.rstrip() for strip in detail.query_one("#stream", RichLog).lines]


def styled(detail: SessionDetail, word: str) -> list[str]:
    """The styles the stream drew `word` with."""
    return [str(seg.style) for strip in detail.query_one("#stream", RichLog).lines for seg in strip
            if word in seg.text]


def paced_scenario(lw: Harness, name: str, pace: float) -> str:
    """A bundled scenario with a pause between steps, so a screen can open half-way through."""
    return lw.run_detached(PY, "-m", "loopwarden.sessions.scripted", name, "--pace", str(pace), name=name)


@pytest.mark.anyio
async def test_history_then_live_events_with_verdicts_highlighted(lw: Harness) -> None:
    sid = paced_scenario(lw, "repetition", 0.25)
    wait_for(lambda: any(e["kind"] == "user_message" for e in lw.events(sid)), what="the first events in the store")
    detail = SessionDetail(lw.paths, sid)
    async with DetailApp(detail).run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: detail.history_done, what="the history")
        from_history = "\n".join(stream_lines(detail))
        assert "user: The login test fails with a 500" in from_history
        assert "TERMINATE" not in from_history  # still to come, live
        await until(pilot, lambda: any("TERMINATE" in line for line in stream_lines(detail)), what="the terminate")
        lines = stream_lines(detail)
        assert sum("user: The login test fails" in line for line in lines) == 1  # the overlap is drawn once
        assert sum("BLOCK repetition" in line for line in lines) == 3
        assert sum("NUDGE repetition" in line for line in lines) >= 1
        assert any("▶ read_file path=src/auth.py" in line for line in lines)
        assert any("◀ read_file ok" in line for line in lines)
        assert any("bold" in s and "red" in s for s in styled(detail, "BLOCK"))
        assert any("on red" in s for s in styled(detail, "TERMINATE"))
        assert any("yellow" in s for s in styled(detail, "NUDGE"))
        await pilot.press("f")
        assert not detail.query_one("#stream", RichLog).auto_scroll
        assert "paused" in str(detail.query_one("#stream", RichLog).border_subtitle)


@pytest.mark.anyio
async def test_spill_link_opens_the_viewer_and_a_missing_file_says_so(lw: Harness) -> None:
    sid = lw.scenario("huge_output")
    lw.wait_state(sid, "exited")
    detail = SessionDetail(lw.paths, sid)
    app = DetailApp(detail)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: detail.spills, what="the spill link")
        path = next(iter(detail.spills.values()))
        lines = stream_lines(detail)
        y = next(i for i, line in enumerate(lines) if "read_logs spilled 300k chars" in line and path in line)
        row = 1 + y - detail.query_one("#stream", RichLog).scroll_offset.y
        await pilot.click("#stream", offset=(1 + lines[y].index(path) + 2, row))  # the path is a link
        viewer = await until(pilot, lambda: isinstance(app.screen, SpillViewer) and app.screen.loaded and app.screen,
                             what="the spill viewer")
        assert path in str(viewer.query_one("#spill-note").content)
        log = viewer.query_one(Log)
        content = Path(path).read_text()  # noqa: ASYNC240 - a test reading its own file
        assert len(content) == 300_000
        assert log.lines == content.splitlines()
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is detail, what="back to the detail")
        os.unlink(path)
        await pilot.press("o")  # the spill highlighted in the list
        viewer = await until(pilot, lambda: isinstance(app.screen, SpillViewer) and app.screen.loaded and app.screen,
                             what="the viewer of a removed file")
        assert "is gone" in str(viewer.query_one("#spill-note").content)
        assert viewer.query_one(Log).line_count == 0


@pytest.mark.anyio
async def test_a_flood_is_drawn_capped_and_ends_with_its_last_event(lw: Harness) -> None:
    sid = lw.run_detached(PY, str(AGENTS / "flood.py"), "30000")
    detail = SessionDetail(lw.paths, sid)
    async with DetailApp(detail).run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: any("done:" in line for line in stream_lines(detail)), timeout=60,
                    what="the flood's last event")
        lines = stream_lines(detail)
        assert len(lines) <= MAX_LINES
        assert sum("done:" in line for line in lines) == 1
        assert lw.status(sid)["events"] >= 30_000


def panel_text(detail: SessionDetail) -> str:
    console = Console(width=60, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(detail.query_one(HealthPanel).content)
    return console.export_text()


@pytest.mark.anyio
async def test_health_bars_reflect_the_counters(lw: Harness) -> None:
    sid = lw.scenario("repetition")
    snap = lw.wait_state(sid, "terminated")
    detail = SessionDetail(lw.paths, sid)
    async with DetailApp(detail).run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "identical_calls" in panel_text(detail), what="the health panel")
        text = panel_text(detail)
    value, limit = snap["counters"]["identical_calls"]
    bar_lines = [words for words in map(str.split, text.splitlines())
                 if words and words[0] in snap["counters"] and "/" in words[-1]]
    bars = {words[0]: words[-1] for words in bar_lines}
    assert bars["identical_calls"] == f"{value:g}/{limit:g}" == "9/5"
    assert bars["blocks"] == "3/3"
    assert bars["validation"] == "0/3"
    assert "terminated (repeated calls)" in text  # why it ended, in words
    assert "TERMINATE repetition" in text
    assert "did not change the approach" in " ".join(text.split())
    first_bars = [words[0] for words in bar_lines]
    assert first_bars[:2] == ["identical_calls", "blocks"]  # the furthest past their limit on top


@pytest.mark.anyio
async def test_process_tree_lists_the_agent_and_its_child(lw: Harness) -> None:
    code = "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    sid = lw.run_detached(PY_NAME, "-c", code, adapter="plain", env=PATH_TO_PY)
    root = lw.wait_state(sid, "running")["pid"]
    rows = wait_for(lambda: (r := lw.request("processes", session=sid)) and len(r) == 2 and r, what="two processes")
    assert rows[0]["pid"] == root and "time.sleep(60)" in rows[0]["cmdline"]
    assert rows[1]["ppid"] == root and rows[1]["name"] == "sleep"
    assert {"pid", "ppid", "name", "cmdline", "cpu_percent", "rss", "status"} <= set(rows[0])
    detail = SessionDetail(lw.paths, sid)
    async with DetailApp(detail).run_test(size=(120, 40)) as pilot:
        tree = detail.query_one(ProcessTree)
        node = await until(pilot, lambda: next((n for n in tree.root.children if n.data == root), None),
                           what="the agent's pid in the tree")
        await until(pilot, lambda: [c.data for c in node.children] == [rows[1]["pid"]], what="its child")
        assert "python" in str(node.label).lower()
        lw.request("kill", session=sid)
        await until(pilot, lambda: "the session has ended" in str(tree.root.children[0].label) if tree.root.children
                    else False, what="the tree of an ended session")
    assert lw.request("processes", session=sid) == []


def test_processes_of_an_unknown_session_is_an_error(lw: Harness) -> None:
    with pytest.raises(DaemonError, match="no session 'nope'"):
        lw.request("processes", session="nope")


# ---- a snapshot of the screen, fed with fixed data ---------------------------------------------------------

T0 = 1_767_268_800.0  # 2026-01-01 12:00:00 UTC

FIXED_SNAPSHOT: dict[str, Any] = {
    "id": "s7", "name": "repetition", "adapter": "native", "state": "terminated", "pid": 4242,
    "started_at": T0, "ended_at": T0 + 83, "runtime": 83.0, "max_runtime": 14400.0, "exit_code": 0,
    "termination": "repetition_loop", "tool_calls": 9, "events": 17, "pending_gates": [],
    "counters": {"blocks": [3, 3], "validation": [0, 3], "runtime": [83.0, 14400.0], "silence": [4.0, 30.0],
                 "identical_calls": [9, 5], "same_error": [1, 3], "alternation": [4, 6], "failures": [0, 5],
                 "tokens": [1200, 0]},
    "last_verdict": {"action": "terminate", "rule": "repetition",
                     "reason": "repetition loop: read_file was called 9 times in a row and 3 blocks did not help"},
    "cpu_percent": 1.0, "rss": 18 << 20, "processes": 2, "rate": [0, 1, 3, 5, 2, 0, 4, 6, 1, 0] * 3,
}


def _event(n: int, data: dict[str, Any]) -> dict[str, Any]:
    return {"kind": data["type"], "ts": T0 + n, "data": {"ts": T0 + n, "seq": n, **data}}


FIXED_HISTORY: dict[str, Any] = {
    "events": [
        _event(1, {"type": "user_message", "text": "The login test fails with a 500. Find out why."}),
        _event(2, {"type": "assistant_message", "text": "Let me look at the login handler."}),
        _event(3, {"type": "tool_call", "tool": "read_file", "args": {"path": "src/auth.py"}}),
        _event(4, {"type": "tool_result", "tool": "read_file", "output": "def login(user, password):\n..."}),
        _event(5, {"type": "tool_call", "tool": "read_logs", "args": {"service": "worker", "since": "1h"}}),
        _event(6, {"type": "tool_result", "tool": "read_logs", "output": "Tool response too large"}),
        {"kind": "log", "ts": T0 + 7, "data": {"stream": "stderr", "text": "scripted: c2 spilled", "ts": T0 + 7}},
        _event(8, {"type": "tool_call", "tool": "bash", "args": {"command": "pytest -x tests/test_login.py"}}),
        _event(9, {"type": "tool_result", "tool": "bash", "output": "FAILED test_login", "is_error": True,
                   "exit_code": 1}),
    ],
    "verdicts": [
        {"ts": T0 + 4.5, "seq": 4, "action": "nudge", "rule": "repetition",
         "reason": "read_file called 2x with identical arguments"},
        {"ts": T0 + 9.2, "seq": 9, "action": "block", "rule": "repetition",
         "reason": "read_file called 6x with identical arguments (block 1/3)"},
        {"ts": T0 + 9.4, "seq": 9, "action": "gate", "rule": "loop_gate", "gate_id": "g1",
         "reason": "3 failed iterations in a row"},
        {"ts": T0 + 83, "seq": 17, "action": "terminate", "rule": "repetition",
         "reason": "session terminated: repetition loop"},
    ],
    "actions": [{"ts": T0 + 60, "action": "approve", "target": "s7:g1", "note": "try the session TTL",
                 "outcome": "approved", "client": "console pid 99"}],
    "spills": [{"ts": T0 + 6.5, "seq": 6, "tool": "read_logs", "size": 300_000,
                "path": "/home/op/.cache/loopwarden/spill/s7-0000006-read_logs.txt"}],
}

FIXED_PROCESSES = [
    {"pid": 4242, "ppid": 4200, "name": "python", "cmdline": "python -m agent --task login", "cpu_percent": 2.0,
     "rss": 40 << 20, "status": "sleeping"},
    {"pid": 4250, "ppid": 4242, "name": "pytest", "cmdline": "pytest -x tests/test_login.py", "cpu_percent": 97.0,
     "rss": 80 << 20, "status": "running"},
]


@pytest.fixture
def utc() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_snapshot_of_the_detail_screen(snap_compare: Any, utc: None, tmp_path: Path) -> None:
    detail = SessionDetail(default_paths({"LOOPWARDEN_HOME": str(tmp_path)}), "s7",
                           snapshot_of=lambda sid: FIXED_SNAPSHOT, history=FIXED_HISTORY,
                           processes=FIXED_PROCESSES, live=False, clock=lambda: T0 + 90)
    assert snap_compare(DetailApp(detail), terminal_size=(100, 30))


@pytest.mark.anyio
async def test_stderr_is_hidden_until_l_and_the_border_says_how_many(tmp_path: Path) -> None:
    history = {**FIXED_HISTORY, "events": [
        *FIXED_HISTORY["events"],
        {"kind": "log", "ts": T0 + 10, "data": {"stream": "stderr", "text": "warning: deprecated", "ts": T0 + 10}},
        {"kind": "log", "ts": T0 + 11, "data": {"stream": "loopwarden", "text": "agent stopped reading",
                                                "ts": T0 + 11}},
        _event(12, {"type": "output", "text": "plain: npm WARN old lockfile", "stream": "stderr"}),
        _event(13, {"type": "output", "text": "plain: 12 tests passed", "stream": "stdout"}),
    ]}
    detail = SessionDetail(default_paths({"LOOPWARDEN_HOME": str(tmp_path)}), "s7", snapshot_of=lambda sid: None,
                           history=history, live=False, clock=lambda: T0 + 90)
    async with DetailApp(detail).run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: detail.history_done, what="the history")
        stream = detail.query_one("#stream", RichLog)
        text = "\n".join(stream_lines(detail))
        assert "scripted: c2 spilled" not in text and "warning: deprecated" not in text
        assert "npm WARN" not in text and "plain: 12 tests passed" in text  # a plain session's stderr, stdout
        assert "loopwarden: agent stopped reading" in text  # loopwarden's own lines are not the agent's stderr
        assert "3 stderr lines hidden (l shows)" in str(stream.border_subtitle)
        await pilot.press("l")
        await until(pilot, lambda: "warning: deprecated" in "\n".join(stream_lines(detail)), what="stderr shown")
        assert "npm WARN" in "\n".join(stream_lines(detail))
        assert "3 stderr lines shown (l hides)" in str(stream.border_subtitle)
        await pilot.press("l")
        await until(pilot, lambda: "warning: deprecated" not in "\n".join(stream_lines(detail)), what="hidden")


def test_a_gate_line_carries_the_time_it_opened_or_was_decided(utc: None) -> None:
    opened = render({"kind": "gate", "data": {"id": "g1", "status": "pending", "reason": "loop", "opened_at": T0}})
    decided = render({"kind": "gate", "data": {"id": "g1", "status": "approved", "opened_at": T0,
                                               "decided_at": T0 + 65, "decided_by": "operator"}})
    assert opened is not None and opened.plain.startswith("12:00:00 ◆ gate g1 open")
    assert decided is not None and decided.plain.startswith("12:01:05 ◆ gate g1 approved")


@pytest.mark.anyio
async def test_j_and_k_scroll_the_stream(tmp_path: Path) -> None:
    detail = SessionDetail(default_paths({"LOOPWARDEN_HOME": str(tmp_path)}), "s7", snapshot_of=lambda sid: None,
                           history=FIXED_HISTORY, live=False, clock=lambda: T0 + 90)
    async with DetailApp(detail).run_test(size=(140, 12)) as pilot:
        stream = detail.query_one("#stream", RichLog)
        await until(pilot, lambda: detail.history_done and stream.max_scroll_y > 2, what="a stream taller than its box")
        await until(pilot, lambda: stream.scroll_y == stream.max_scroll_y, what="the stream following its end")
        bottom = stream.scroll_y
        await pilot.press("k", "k")
        await until(pilot, lambda: stream.scroll_y == bottom - 2, what="k to scroll up")
        await pilot.press("j")
        await until(pilot, lambda: stream.scroll_y == bottom - 1, what="j to scroll down")


def _panel_text(snap: dict[str, Any]) -> str:
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(health_view(snap, T0 + 90))
    return out.getvalue()


def test_the_health_panel_stops_asking_for_a_decision_once_the_gate_is_closed() -> None:
    gate = {"action": "gate", "rule": "loop_gate", "gate_id": "g1",
            "reason": messages.loop_gate("t1", 3, "3 failed iterations", "FAILED test_login")}
    waiting = _panel_text({**FIXED_SNAPSHOT, "state": "gated", "pending_gates": ["g1"], "last_verdict": gate})
    assert "Waiting for a human decision." in waiting and "gate closed" not in waiting  # the near miss
    approved = _panel_text({**FIXED_SNAPSHOT, "state": "exited", "pending_gates": [], "last_verdict": gate})
    assert "GATE loop_gate (gate closed)" in approved and "Waiting for a human" not in approved
    assert "Loop detected on task t1: loop count 3" in approved  # the evidence stays
