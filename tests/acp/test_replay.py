"""`loopwarden replay --format acp`: a recorded ACP agent stream through the engine.

The data (tests/acp/data/acp_looping.jsonl, made by tests/acp/record_stream.py) is the stdout of the fake
ACP agent looping on `echo looping`: five calls allowed, the sixth rejected (its update says failed), then
the turn ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loopwarden.replay import iter_events
from loopwarden.supervisor import events as ev

STREAM = Path(__file__).resolve().parent / "data" / "acp_looping.jsonl"


def test_the_recorded_stream_maps_to_events() -> None:
    with STREAM.open("rb") as f:
        events = list(iter_events(f, "acp", 1 << 20))
    kinds = [e.kind for e in events]
    assert kinds.count("tool_call") == 6 and kinds.count("tool_result") == 6 and kinds.count("invalid_line") == 0
    calls = [e for e in events if type(e) is ev.ToolCall]
    assert {c.tool for c in calls} == {"execute"} and all(c.args == {"command": "echo looping"} for c in calls)
    results = [e for e in events if type(e) is ev.ToolResult]
    assert [r.output for r in results[:5]] == ["looping\n"] * 5 and not any(r.is_error for r in results[:5])
    assert results[5].is_error and [r.call_id for r in results] == [c.call_id for c in calls]
    assert [e.text for e in events if type(e) is ev.AssistantMessage] == [
        "Working on it.", "Plan:\n- [in_progress] do the task", "Done."]
    assert [(e.n, e.status) for e in events if type(e) is ev.Iteration] == [(1, "pass")]
    assert [(e.input_tokens, e.output_tokens) for e in events if type(e) is ev.Usage] == [(100, 10)]


def test_replay_judges_it_like_any_other_format() -> None:
    proc = subprocess.run([sys.executable, "-m", "loopwarden", "replay", "--format", "acp", str(STREAM)],
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    verdicts = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [(v["action"], v["rule"]) for v in verdicts] == [("nudge", "repetition"), ("block", "repetition")]
    assert "execute called 6x" in verdicts[1]["reason"] and b"tool_call 6" in proc.stderr
