"""A real daemon asks the fake Messages API for a second opinion on a long monologue (a real agent process).

The agent (tests/agents/monologue_agent.py) talks without calling a tool; the monologue rule nudges at
`repetition.max_monologue` messages and opens a gate at twice that, both marked ambiguous. The daemon
asks the model; only "progress" above `opinion.min_confidence` withholds the nudge or approves the gate.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic_server import FakeAnthropic, hang, say
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

KEY = "sk-ant-daemon-key-0123456789"
AGENT_SECRET = "tok-agent-secret-98765"  # in the agent's environment; it prints it


@pytest.fixture
def keyed(tmp_path: Path, fake_api: FakeAnthropic) -> Iterator[Harness]:
    """A daemon with the API key in its environment (as a user's shell would give it)."""
    harness = Harness(tmp_path)
    harness.env.update({"LW_TEST_OPINION_KEY": KEY, "MY_SERVICE_TOKEN": AGENT_SECRET})
    harness.start()
    try:
        yield harness
    finally:
        harness.stop()


def opinion_sets(fake: FakeAnthropic, *more: str) -> tuple[str, ...]:
    return ("repetition.max_monologue=3", "opinion.enabled=true", f"opinion.base_url={fake.url}",
            "opinion.api_key_env=LW_TEST_OPINION_KEY", "opinion.timeout=20s", *more)


def answer(verdict: str, confidence: float) -> Any:
    return say(json.dumps({"verdict": verdict, "confidence": confidence, "reason": f"the agent is in a {verdict}"}))


def start(lw: Harness, tmp_path: Path, name: str, sets: tuple[str, ...], messages: int = 3,
          more: int = 0) -> tuple[str, Path, Path]:
    record, trigger = tmp_path / f"{name}.record", tmp_path / f"{name}.go"
    args = [str(record), str(messages), "MY_SERVICE_TOKEN"] + ([str(trigger), str(more)] if more else [])
    sid = lw.run_detached(PY, str(AGENTS / "monologue_agent.py"), *args, sets=sets, name=name)
    return sid, record, trigger


def opinions(lw: Harness, sid: str, n: int = 1) -> list[dict[str, Any]]:
    """The session's audit rows of second opinions, once there are `n`."""
    def rows() -> list[dict[str, Any]] | None:
        found = [a for a in lw.request("actions", session=sid) if a["action"].startswith("opinion:")]
        return found if len(found) >= n else None
    return wait_for(rows, 30, f"{n} second opinion(s) in the audit log")


def received(lw: Harness, sid: str, record: Path) -> list[dict[str, Any]]:
    """Everything the agent got on stdin before an operator's marker (its stdin is in order, so a nudge
    queued before the marker is there), then the session is killed."""
    lw.request("inject", session=sid, text="END-MARKER")
    lines = wait_for(lambda: record.exists() and "END-MARKER" in record.read_text() and record.read_text(),
                     what="the operator's marker")
    lw.request("kill", session=sid)
    lw.wait_state(sid, "terminated", "exited")
    return [json.loads(line) for line in lines.splitlines()]


def injected(lines: list[dict[str, Any]]) -> list[str]:
    return [m.get("rule", "") for m in lines if m.get("type") == "inject" and m.get("kind") != "operator"]


def test_progress_withholds_the_nudge_and_the_call_is_audited(keyed: Harness, tmp_path: Path,
                                                                fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: answer("progress", 0.95))
    sid, record, _ = start(keyed, tmp_path, "talker", opinion_sets(fake_api))
    row = opinions(keyed, sid)[0]
    assert row["actor"] == "second-opinion" and row["action"] == "opinion:monologue"
    assert row["outcome"] == "withheld: progress" and row["target"].startswith("nudge monologue at seq")
    assert "progress at 0.95" in row["note"] and " in, " in row["note"] and "price unknown" not in row["note"]
    assert injected(received(keyed, sid, record)) == []  # the rule's nudge never reached the agent
    shown = [(v["action"], v["rule"], v["reason"]) for v in keyed.verdicts(sid)]
    assert ("nudge", "monologue", "3 assistant messages with no tool call") in shown  # what the rule decided
    assert ("allow", "second-opinion", "monologue nudge withheld: progress at 0.95: the agent is in a progress") \
        in shown  # ... and what became of it, in the history `logs` and `explain` read
    sent = json.dumps(fake_api.messages)
    assert "step 3: still explaining" in sent  # the recent events went with the question
    assert AGENT_SECRET not in sent and KEY not in sent  # ... without the secrets the agent printed
    assert KEY not in (tmp_path / "daemon.out").read_text()


@pytest.mark.parametrize(("verdict", "confidence", "outcome"), [
    ("loop", 0.99, "stands: loop"),
    ("progress", 0.6, "stands: confidence 0.60 below the threshold"),  # the near miss of the first test
])
def test_loop_or_low_confidence_lets_the_nudge_through(keyed: Harness, tmp_path: Path, fake_api: FakeAnthropic,
                                                       verdict: str, confidence: float, outcome: str) -> None:
    fake_api.play(lambda body: answer(verdict, confidence))
    sid, record, _ = start(keyed, tmp_path, "looper", opinion_sets(fake_api))
    assert opinions(keyed, sid)[0]["outcome"] == outcome
    wait_for(lambda: record.exists() and '"inject"' in record.read_text(), what="the nudge")
    assert injected(received(keyed, sid, record)) == ["monologue"]


def test_a_hanging_api_times_out_and_the_rule_decides(
        keyed: Harness, tmp_path: Path, fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: hang(120.0, answer("progress", 1.0)))
    sid, record, _ = start(keyed, tmp_path, "waiting", opinion_sets(fake_api, "opinion.timeout=4s"))
    wait_for(lambda: fake_api.messages, what="the question")
    asked = time.monotonic()
    row = opinions(keyed, sid)[0]
    assert row["outcome"] == "stands: timed out after 4s" and "no answer" in row["note"]
    wait_for(lambda: record.exists() and '"inject"' in record.read_text(), what="the rule's nudge")
    assert time.monotonic() - asked < 60  # the hang is 120 s: only the timeout ended the wait
    assert injected(received(keyed, sid, record)) == ["monologue"]


def test_asking_holds_only_the_verdict_and_a_session_ended_meanwhile_audits_the_call(keyed: Harness, tmp_path: Path,
                                                                fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: hang(120.0))
    sid, record, _ = start(keyed, tmp_path, "ending", opinion_sets(fake_api, "opinion.timeout=60s"))
    wait_for(lambda: fake_api.messages, what="the question")
    other = keyed.run_detached(PY, "-c", "print('hi')", name="other")  # the daemon serves others meanwhile
    assert keyed.wait_state(other, "exited")["exit_code"] == 0
    said = [e["data"]["text"] for e in keyed.events(sid) if e["kind"] == "assistant_message"]
    assert said[-1].startswith("step 3")  # its events were stored meanwhile
    assert injected(received(keyed, sid, record)) == []  # killed while asking: the nudge was held, never sent
    row = opinions(keyed, sid)[0]
    assert row["outcome"] == "stands: the session ended before the answer"


def test_progress_approves_the_gate_and_loop_leaves_it_to_a_human(keyed: Harness, tmp_path: Path,
                                                                   fake_api: FakeAnthropic) -> None:
    said = iter(["progress", "progress", "loop", "loop"])  # per request: two sessions, a nudge then a gate each
    fake_api.play(lambda body: answer(next(said), 0.9))
    sid, _, go = start(keyed, tmp_path, "long", opinion_sets(fake_api), more=3)
    opinions(keyed, sid, 1)
    go.touch()  # messages 4-6: the gate
    gate_row = opinions(keyed, sid, 2)[-1]
    assert gate_row["outcome"] == "withheld: progress" and "(gate g1)" in gate_row["target"]
    assert any(v["rule"] == "second-opinion" and v["reason"].startswith("monologue gate withheld")
               for v in keyed.verdicts(sid))
    wait_for(lambda: keyed.status(sid)["state"] == "running", what="the gate approved")
    assert not [g for g in keyed.request("gates") if g["session"] == sid]

    sid2, _, go2 = start(keyed, tmp_path, "stuck", opinion_sets(fake_api), more=3)
    opinions(keyed, sid2, 1)
    go2.touch()
    assert opinions(keyed, sid2, 2)[-1]["outcome"] == "stands: loop"
    pending = [g for g in keyed.request("gates") if g["session"] == sid2]
    assert [g["rule"] for g in pending] == ["monologue"]  # a human decides


def test_without_a_key_or_when_off_no_call_is_made(keyed: Harness, tmp_path: Path, fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: answer("progress", 1.0))
    sets = opinion_sets(fake_api, "opinion.api_key_env=LW_TEST_NO_SUCH_KEY")
    sid, record, _ = start(keyed, tmp_path, "nokey", sets)
    wait_for(lambda: record.exists() and '"inject"' in record.read_text(), what="the rule's own nudge")
    logs = keyed.cli("logs", sid).stdout
    assert "second opinion off: LW_TEST_NO_SUCH_KEY is not set in the daemon's environment" in logs
    off, off_record, _ = start(keyed, tmp_path, "off", (f"opinion.base_url={fake_api.url}",
                                                         "opinion.api_key_env=LW_TEST_OPINION_KEY",
                                                         "repetition.max_monologue=3"))
    wait_for(lambda: off_record.exists() and '"inject"' in off_record.read_text(), what="the rule's own nudge")
    assert fake_api.requests == []
    assert not [a for a in keyed.request("actions") if a["action"].startswith("opinion:")]
    assert injected(received(keyed, sid, record)) == ["monologue"]
    assert injected(received(keyed, off, off_record)) == ["monologue"]


def test_past_max_calls_the_rules_decide_alone(keyed: Harness, tmp_path: Path, fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: answer("progress", 1.0))
    sid, _, go = start(keyed, tmp_path, "spent", opinion_sets(fake_api, "opinion.max_calls=1"), more=3)
    assert opinions(keyed, sid)[0]["outcome"] == "withheld: progress"  # the one question: the nudge
    go.touch()
    pending = wait_for(lambda: [g for g in keyed.request("gates") if g["session"] == sid], what="the gate")
    assert [g["rule"] for g in pending] == ["monologue"]  # not asked: a human decides
    assert len(fake_api.messages) == 1
    assert "the session's 1 questions are asked (opinion.max_calls)" in keyed.cli("logs", sid).stdout
