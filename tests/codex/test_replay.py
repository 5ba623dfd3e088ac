"""`loopwarden replay --format codex-app-server`: a recorded real app-server stream through the engine.

The data (tests/codex/data/app_server_looping.jsonl, made by tests/codex/record_stream.py) is the
stdout of the real Codex 0.163.0 app-server: a model that ran `echo looping` five times (accepted),
had the sixth declined with a steered reason, then gave up with a message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loopwarden.replay import iter_events
from loopwarden.supervisor import events as ev

STREAM = Path(__file__).resolve().parent / "data" / "app_server_looping.jsonl"


def test_the_recorded_stream_maps_to_events() -> None:
    with STREAM.open("rb") as f:
        events = list(iter_events(f, "codex-app-server", 1 << 20))
    kinds = [e.kind for e in events]
    assert kinds.count("tool_call") == 6 and kinds.count("tool_result") == 5  # the declined call never ran
    assert kinds.count("user_message") == 1  # the prompt; the steered reason is loopwarden's own text
    assert kinds.count("invalid_line") == 0
    calls = [e for e in events if type(e) is ev.ToolCall]
    assert {c.tool for c in calls} == {"shell"} and all("echo looping" in c.args["command"] for c in calls)
    results = [e for e in events if type(e) is ev.ToolResult]
    assert all(r.output == "looping\n" and r.exit_code == 0 for r in results)
    assert [r.call_id for r in results] == [c.call_id for c in calls[:5]]
    assert [e.text for e in events if type(e) is ev.AssistantMessage] == ["I keep repeating myself; stopping."]
    assert [(e.n, e.status) for e in events if type(e) is ev.Iteration] == [(1, "pass")]
    assert sum(e.input_tokens for e in events if type(e) is ev.Usage) > 0


def test_replay_judges_it_like_any_other_format() -> None:
    proc = subprocess.run([sys.executable, "-m", "loopwarden", "replay", "--format", "codex-app-server",
                           str(STREAM)], capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    verdicts = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [(v["action"], v["rule"]) for v in verdicts] == [("nudge", "repetition"), ("block", "repetition")]
    assert "shell called 6x" in verdicts[1]["reason"]
    assert b"6 tool_call" not in proc.stderr and b"tool_call 6" in proc.stderr
