"""Every prefix of a recorded stream, judged on the live path (the judge, the journal, the daemon's record path,
SQLite), rebuilds from the store to the state the live session holds after that prefix."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from loopwarden.runtime.store import TEXT_CAP
from loopwarden.supervisor.events import Event, ToolResult
from loopwarden.replay import choose_format, iter_events, max_line_bytes, open_recording
from tests.rebuild.helpers import Recorded, differences
from tests.support.paths import ROOT, TRANSCRIPTS, recording

RECORDINGS = ["loopwarden/examples/demo.jsonl", *(f"{TRANSCRIPTS.name}/{n}" for n in (
    "claude_stream-json__ccagent__claude_response1.jsonl",
    "claude_stream-json__ccagent__claude-session-with-image.jsonl",
    "claude_turns_array__claude-code-action__sample-turns.json",
    "codex_exec_json__agentcmd__stream-output-4.jsonl"))]


@pytest.mark.parametrize("name", RECORDINGS, ids=lambda n: Path(n).stem)
def test_each_prefix_of_a_recording_rebuilds_to_the_live_state(name: str, tmp_path: Path) -> None:
    path = recording(name) if name.startswith("loopwarden/") else _shared(name)

    async def go() -> int:
        rec = Recorded(tmp_path)
        try:
            with path.open("rb") as raw:
                guess, stream = open_recording(raw)
                fmt = choose_format(None, guess, path.name)
                events = list(iter_events(stream, fmt, max_line_bytes(rec.config, fmt)))
            for n, event in enumerate(events, 1):
                if over_the_cap(event):
                    return n - 1
                rec.clock.now += 0.5 + (event.seq % 7)  # the stall limit is crossed now and then
                rec.session.judge.judge(event)
                rebuilt, live = rec.rebuilt_state(), rec.live_state()
                assert rebuilt == live, f"{path.name}, after event {n}: {differences(rebuilt, live)}"
            return len(events)
        finally:
            rec.close()

    assert asyncio.run(go()) >= 5


def over_the_cap(event: Event) -> bool:
    """A tool output longer than the store keeps of a text: it is stored cut (or spilled, as its notice)."""
    return type(event) is ToolResult and len(event.output) > TEXT_CAP


_OVER_THE_CAP = ("an output over the store's text cap is stored cut, or spilled as its notice: the rules that keep the "
                 "output (its digest, an error's text) see what the store kept")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=_OVER_THE_CAP)
def test_an_output_over_the_stores_text_cap_rebuilds_to_the_live_state(tmp_path: Path) -> None:
    async def go() -> None:
        rec = Recorded(tmp_path)
        try:
            rec.line('{"type":"tool_call","tool":"read_logs","args":{}}')
            rec.line(json.dumps({"type": "tool_result", "tool": "read_logs", "output": "x" * (TEXT_CAP + 1)}))
            assert rec.rebuilt_state() == rec.live_state()
        finally:
            rec.close()

    asyncio.run(go())


def _shared(name: str) -> Path:
    """A recording of the shared folder beside the clone; the test skips without it."""
    path = TRANSCRIPTS / Path(name).name
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared recordings beside {ROOT.name})")
    return path
