"""Every bundled scenario, run live through the daemon, produces its verdicts."""

from __future__ import annotations

import pytest

from tests.support.daemon import Harness
from tests.support.events import rules

# name -> (verdicts that must appear, final state, termination)
EXPECTED = {
    "repetition": ([("nudge", "repetition"), ("block", "repetition"), ("terminate", "repetition")],
                   "terminated", "repetition_loop"),
    "same_error": ([("block", "same_error")], "exited", None),
    "alternation": ([("nudge", "alternation"), ("block", "alternation")], "exited", None),
    "validation": ([("nudge", "validation"), ("terminate", "validation")], "terminated", "validation_failure"),
    "stall": ([("nudge", "stall")], "exited", None),
    "max_runtime": ([("terminate", "runtime")], "terminated", "max_runtime"),
    "huge_output": ([("spill", "large_output")], "exited", None),
    "loop_gate": ([("gate", "loop_counter")], "exited", None),
    "gate_request": ([("gate", "gate_request")], "exited", None),
    "blocked_spin": ([("unblock_authority", "blocked_task_spin")], "exited", None),
    "healthy": ([], "exited", None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundled_scenario_live(lw: Harness, name: str) -> None:
    expected, final, termination = EXPECTED[name]
    sid = lw.scenario(name)
    if any(action == "gate" for action, _ in expected):
        snap = lw.wait_state(sid, "gated")
        for gate in snap["pending_gates"]:
            assert lw.cli("approve", f"{sid}:{gate}").returncode == 0
    snap = lw.wait_state(sid, "exited", "terminated", timeout=40)
    assert snap["state"] == final, snap
    assert snap["termination"] == termination
    if final == "exited":
        assert snap["exit_code"] == 0
    found = rules(lw.verdicts(sid))
    for verdict in expected:
        assert verdict in found, (verdict, found)
    if not expected:
        assert found == []


def test_a_spilled_output_reaches_the_agent_as_a_private_file(lw: Harness) -> None:
    import os
    import stat

    sid = lw.scenario("huge_output")
    lw.wait_state(sid, "exited")
    [spill] = [v for v in lw.verdicts(sid) if v["action"] == "spill"]
    path = spill["evidence"]["path"]
    assert os.path.dirname(path) == str(lw.paths.spill)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.path.getsize(path) == 300_000
    stored = [e for e in lw.events(sid) if e["kind"] == "tool_result" and e["seq"] == spill["seq"]]
    assert stored and len(stored[0]["data"]["output"]) < 5000  # the store keeps the message, not the output
