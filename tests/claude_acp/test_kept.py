"""Claude Code over ACP (the real claude-agent-acp on the fake Messages API) kept by the keeper
(`[daemon] keep_agents = true`): the daemon SIGKILLed while a gate holds a permission request, the keeper's next
daemon answers it once approved, steers the guidance into the turn and closes the ACP session at the end."""

from __future__ import annotations

from pathlib import Path
import pytest

from loopwarden.runtime.session import group_alive
from tests.claude_acp.test_launched import MONOLOGUE_GATE, planning_script, said, start
from tests.claude_code.conftest import QUIET
from tests.fakes.anthropic_server import FakeAnthropic
from tests.keeper.test_durable import ended, kept  # noqa: F401 - a fixture, and a helper
from tests.support.daemon import Harness
from tests.support.events import of_kind, rules
from tests.support.keeping import killed_and_taken_up, stored_once
from tests.support.processes import gone
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def kept_ca(kept: Harness, fake_api: FakeAnthropic, claude_acp: str, tmp_path: Path) -> Harness:  # noqa: F811
    """A daemon whose agents the keeper holds, set up so `loopwarden run --agent claude-acp` starts the real
    adapter on the fake API, with a temporary HOME and working directory."""
    home, work = tmp_path / "claude-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    kept.env.update({**fake_api.env(), **QUIET, "HOME": str(home), "LOOPWARDEN_CLAUDE_ACP": claude_acp})
    kept.work = work  # type: ignore[attr-defined]
    return kept


def test_a_permission_request_held_by_a_gate_is_answered_by_the_next_daemon(
        kept_ca: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play(planning_script, max_turns=20)
    sid = start(kept_ca, "make a marker", sets=MONOLOGUE_GATE)
    before = kept_ca.wait_state(sid, "gated", timeout=60)
    held = wait_for(lambda: next(iter(of_kind(kept_ca, sid, "tool_call")), None), 30, "the held tool call")
    marker = kept_ca.work / "held-marker"  # type: ignore[attr-defined]
    snap = killed_and_taken_up(kept_ca, sid)
    assert snap["pid"] == before["pid"], "the same adapter, kept"
    assert snap["state"] == "gated" and snap["pending_gates"] == before["pending_gates"]
    assert not marker.exists() and not of_kind(kept_ca, sid, "tool_result")
    assert kept_ca.request("approve", gate=f"{sid}:{before['pending_gates'][0]}",
                           note="GUIDANCE-7 the marker is enough")
    snap = ended(kept_ca, [sid], timeout=90)[sid]
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap  # the session closed, the adapter exited
    assert marker.exists(), "the approved call ran"
    assert rules(kept_ca.verdicts(sid))[:2] == [("nudge", "monologue"), ("gate", "monologue")]
    assert said(fake_api, "GUIDANCE-7"), "the guidance never reached the model"
    assert of_kind(kept_ca, sid, "iteration")[-1]["status"] == "pass"
    calls = stored_once(kept_ca, sid)
    assert [c["call_id"] for c in calls].count(held["call_id"]) == 1
    assert [r["call_id"] for r in of_kind(kept_ca, sid, "tool_result")].count(held["call_id"]) == 1
    assert gone(snap["pid"]) and not group_alive(snap["pid"])
