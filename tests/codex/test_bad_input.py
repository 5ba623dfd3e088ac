"""Garbage from the app-server never crashes the daemon, and every request gets an answer.

A stand-in app-server (tests/agents/fake_codex_app.py, run through $LOOPWARDEN_CODEX) writes broken
JSON, invalid UTF-8, a line nested 5,000 deep, an over-long approval request, requests nobody
handles and a request with an unreadable id, between real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY

pytestmark = pytest.mark.timeout(60)


def test_garbage_from_the_app_server_is_counted_and_every_request_answered(lw: Harness, tmp_path: Path) -> None:
    wrapper = tmp_path / "codex"
    wrapper.write_text(f"#!/bin/sh\nexec {PY} {AGENTS / 'fake_codex_app.py'} \"$@\"\n")
    wrapper.chmod(0o755)
    report = tmp_path / "answers.jsonl"
    lw.env.update({"LOOPWARDEN_CODEX": str(wrapper), "FAKE_CODEX_REPORT": str(report)})
    sid = lw.run_detached("do something", adapter="codex", name="hostile",
                          sets=("limits.max_line_bytes=1048576", "validation.max_consecutive=50"))
    snap = lw.wait_state(sid, "exited", "terminated", timeout=40)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert lw.daemon is not None and lw.daemon.poll() is None, "the daemon died"
    answers = {a["id"]: a for a in map(json.loads, report.read_text().splitlines()) if "id" in a}
    assert answers[7]["result"] == {"decision": "decline"}  # unreadable: refused, never left waiting
    assert answers[8]["result"] == {"decision": "decline"}  # over the line limit: refused
    assert "error" in answers[9]  # a request loopwarden does not handle
    assert answers[10]["result"] == {"decision": "accept"}  # readable enough to judge: no objection
    assert answers[11]["result"] == {"action": "decline"}
    assert json.loads(report.read_text().splitlines()[-1]) == {"eof": True}  # stdin closed after the turn
    events = lw.events(sid)
    invalid = [e["data"]["reason"] for e in events if e["kind"] == "invalid_line"]
    assert len(invalid) >= 8, invalid
    assert any("deep" in r for r in invalid) and any("longer than" in r for r in invalid)
    assert any("UTF-8" in r for r in invalid)
    assert next(e for e in events if e["kind"] == "tool_call")["data"]["args"] == {"command": None}
    assert any(s["id"] == sid for s in lw.request("list")), "the daemon no longer answers"
