"""Gates decided by humans, operator actions, and the audit log that records them."""

from __future__ import annotations

import threading

from loopwarden.runtime.client import DaemonError
from tests.support.daemon import Harness
from tests.support.events import rules


def _gate(lw: Harness, sid: str) -> str:
    snap = lw.wait_state(sid, "gated")
    return f"{sid}:{snap['pending_gates'][0]}"


def test_two_clients_see_the_same_gate_and_only_one_decision_wins(lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    ref = _gate(lw, sid)
    with lw.client() as a, lw.client() as b:
        assert [g["ref"] for g in a.request("gates")] == [ref]
        assert [g["ref"] for g in b.request("gates")] == [ref]
        results: dict[str, object] = {}
        barrier = threading.Barrier(2)

        def decide(name: str, client, approve: bool) -> None:  # type: ignore[no-untyped-def]
            barrier.wait()
            try:
                results[name] = client.request("approve" if approve else "deny", gate=ref, note=name)
            except DaemonError as exc:
                results[name] = exc

        threads = [threading.Thread(target=decide, args=("a", a, True)),
                   threading.Thread(target=decide, args=("b", b, False))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    errors = [r for r in results.values() if isinstance(r, DaemonError)]
    wins = [r for r in results.values() if isinstance(r, dict)]
    assert len(wins) == 1 and len(errors) == 1
    assert "already" in str(errors[0])
    assert lw.request("gates") == []


def test_approving_a_gate_with_guidance_releases_the_held_call_and_injects_the_note(lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    ref = _gate(lw, sid)
    proc = lw.cli("approve", ref, "--note", "drop it, then vacuum")
    assert proc.returncode == 0, proc.stderr
    snap = lw.wait_state(sid, "exited")
    assert snap["exit_code"] == 0
    verdicts = lw.verdicts(sid)
    assert ("gate", "gate_request") in rules(verdicts)
    guidance = [v for v in verdicts if v["rule"] == "operator"]
    assert guidance and "drop it, then vacuum" in guidance[0]["message"]
    assert any(e["kind"] == "done" for e in lw.events(sid))


def test_denying_a_gate_terminates_with_loop_gate_denied(lw: Harness) -> None:
    sid = lw.scenario("loop_gate")
    ref = _gate(lw, sid)
    proc = lw.cli("deny", ref, "--note", "stop, I will look myself")
    assert proc.returncode == 0, proc.stderr
    snap = lw.wait_state(sid, "terminated")
    assert snap["termination"] == "loop_gate_denied"
    again = lw.cli("approve", ref)
    assert again.returncode == 2 and "was already denied by uid" in again.stderr


def test_every_operator_action_lands_in_the_audit_log(lw: Harness) -> None:
    sid = lw.scenario("loop_gate")
    ref = _gate(lw, sid)
    for args in (("inject", sid, "look at the seed data"), ("grant", sid, "--note", "stub the mailer"),
                 ("reset", sid, "--counter", "loop"), ("pause", sid), ("resume", sid),
                 ("approve", ref, "--note", "remove the duplicate")):
        proc = lw.cli(*args)
        assert proc.returncode == 0, (args, proc.stderr)
    lw.wait_state(sid, "terminated", "exited")
    other = lw.run_detached("python3", "-c", "import time; time.sleep(60)", adapter="plain")
    lw.wait_state(other, "running")
    assert lw.cli("kill", other, "--note", "enough").returncode == 0
    lw.wait_state(other, "terminated")
    actions = [a for a in lw.request("actions") if a["action"] != "run"]
    assert [a["action"] for a in actions] == ["inject", "grant", "reset", "pause", "resume", "approve", "kill"]
    for a in actions:
        assert a["actor"].startswith("uid ") and a["client"].startswith("cli pid ") and a["ts"] > 0
    assert actions[1]["note"] == "stub the mailer" and actions[6]["note"] == "enough"
    assert actions[5]["target"] == ref and actions[6]["session_id"] == other  # a gate is named SESSION:GATE
    assert [a["action"] for a in lw.request("actions") if a["action"] == "run"] == ["run", "run"]


def test_refused_decisions_are_audited_too(lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    ref = _gate(lw, sid)
    assert lw.cli("approve", ref).returncode == 0
    second = lw.cli("approve", ref)
    assert second.returncode == 2 and "already approved" in second.stderr
    outcomes = [a["outcome"] for a in lw.request("actions", session=sid) if a["action"] == "approve"]
    assert outcomes[0] == "done" and outcomes[1].startswith("refused: ")
