"""The built-in agent (loopwarden-agent) against the fake Messages API, under a real daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwarden.sessions.claude_agent import DEFAULT_MODELS, run_tool
from tests.fakes.anthropic_server import (
    FakeAnthropic,
    Turn,
    assistant_turns,
    call,
    fail,
    result_text,
    say,
    tool_results,
    user_texts,
)
from tests.support.daemon import Harness
from tests.support.events import rules
from tests.support.paths import PY

pytestmark = pytest.mark.timeout(60)
HAIKU, SONNET, OPUS = DEFAULT_MODELS
AGENT = ("-m", "loopwarden.sessions.claude_agent", "--max-retries", "0")


def start(lw: Harness, api: FakeAnthropic, *args: str, sets: tuple[str, ...] = (),
          env: dict[str, str] | None = None) -> str:
    """`loopwarden run -d -- python -m loopwarden.sessions.claude_agent ARGS` against the fake API."""
    lw.env.update(api.env())
    lw.env.update(env or {})
    return lw.run_detached(PY, *AGENT, *args, sets=sets, name="agent")


def kinds(lw: Harness, sid: str) -> list[str]:
    return [e["kind"] for e in lw.events(sid) if e["kind"] != "log"]


def requests_with(api: FakeAnthropic, text: str) -> list[int]:
    """Indexes of the conversation requests whose user side says `text`."""
    return [i for i, body in enumerate(api.messages) if any(text in t for t in user_texts(body))]


def test_a_repeated_call_is_nudged_then_blocked_and_the_block_reaches_the_model(
        lw: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: call("bash", {"command": "echo same"}), max_turns=30)
    sid = start(lw, fake_api, "count the files")
    snap = lw.wait_state(sid, "terminated", "exited")
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop")
    verdicts = lw.verdicts(sid)
    found = rules(verdicts)
    assert found.index(("nudge", "repetition")) < found.index(("block", "repetition"))
    assert found[-1] == ("terminate", "repetition")
    # five identical calls ran (repetition.max_identical_calls); the blocked ones sent no tool_result
    assert kinds(lw, sid).count("tool_result") == 5
    block = next(v for v in verdicts if v["action"] == "block")
    seen = [r for body in fake_api.messages for r in tool_results(body, last_only=True)]
    assert any(r["is_error"] is True and result_text(r) == block["message"] for r in seen)
    nudge = next(v for v in verdicts if v["action"] == "nudge")
    assert requests_with(fake_api, nudge["message"]), "the nudge never reached the model"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
def test_a_healthy_run_edits_a_file_and_exits_0(lw: Harness, fake_api: FakeAnthropic, tmp_path: Path,
                                               stream: bool) -> None:
    work = tmp_path / "work"
    work.mkdir()
    source = 'print("Hello, wrold")\n'
    (work / "greet.py").write_text(source)
    fake_api.play([
        call("read_file", {"path": "greet.py"}, text="Let me look at the script."),
        call("edit_file", {"path": "greet.py", "old_string": "wrold", "new_string": "world"}),
        call("bash", {"command": f"{sys.executable} greet.py"}),
        say("Fixed the typo; greet.py prints Hello, world."),
    ])
    sid = start(lw, fake_api, "-C", str(work), *(() if stream else ("--no-stream",)), "fix the greeting")
    snap = lw.wait_state(sid, "exited", "terminated")
    assert (snap["state"], snap["exit_code"]) == ("exited", 0)
    assert (work / "greet.py").read_text() == 'print("Hello, world")\n'
    assert lw.verdicts(sid) == []
    bodies = fake_api.messages
    assert len(bodies) == 4 and all(bool(b.get("stream")) is stream for b in bodies)
    assert fake_api.models() == [HAIKU] * 4
    assert result_text(tool_results(bodies[1], last_only=True)[0]) == source
    assert "Hello, world" in result_text(tool_results(bodies[3], last_only=True)[0])
    found = kinds(lw, sid)
    assert found[0] == "hello" and found[-1] == "done"
    assert [found.count(k) for k in ("tool_call", "tool_result", "iteration", "usage")] == [3, 3, 3, 4]
    events = lw.events(sid)
    assert [e["data"]["files_modified"] for e in events if e["kind"] == "iteration"] == [[], ["greet.py"], []]
    assert any(e["kind"] == "assistant_message" and "Let me look" in e["data"]["text"] for e in events)
    usages = [e["data"] for e in events if e["kind"] == "usage"]  # named by the model the API answered with
    assert all(u["model"] == HAIKU for u in usages) and snap["cost"]["models"] == [HAIKU]
    assert snap["cost"]["source"] == "table" and snap["cost"]["unpriced"] == 0  # its default models have a price
    assert next(e for e in events if e["kind"] == "done")["data"]["summary"].startswith("Fixed the typo")


def _failing_until_guided(note: str, failures: int = 5) -> Any:
    """Failing commands (each different), then harmless ones until `note` reaches the model."""
    words = ["alpha", "bravo", "charlie", "delta", "echo"][:failures]

    def script(body: dict[str, Any]) -> Turn:
        if any(note in t for t in user_texts(body)):
            return say("Following the guidance; done.")
        n = assistant_turns(body)
        if n < len(words):
            return call("bash", {"command": f"echo attempt {words[n]} failed; exit 1"})
        return call("bash", {"command": f"echo waiting {n}"})
    return script


def test_escalate_verdicts_move_the_model_up_the_ladder_then_a_human_gate_guides_it(
        lw: Harness, fake_api: FakeAnthropic) -> None:
    note = "look at the fixture data first"
    fake_api.play(_failing_until_guided(note), max_turns=30)
    sid = start(lw, fake_api, "make the build pass",
                sets=("failures.max_consecutive=0", "escalation.failures_at_top=1"))
    snap = lw.wait_state(sid, "gated")
    verdicts = lw.verdicts(sid)
    assert [v["target"] for v in verdicts if v["action"] == "escalate"] == ["sonnet", "opus", "human"]
    [gate] = snap["pending_gates"]
    assert lw.cli("approve", f"{sid}:{gate}", "--note", note).returncode == 0
    snap = lw.wait_state(sid, "exited", "terminated")
    assert (snap["state"], snap["exit_code"]) == ("exited", 0)
    models = fake_api.models()
    # the escalation after iteration 2 precedes the verdict on call 3, so request 4 (index 3) is on sonnet;
    # the one after iteration 4 precedes call 5's verdict, so request 6 on is on opus
    assert models[:2] == [HAIKU, HAIKU] and models[3] == SONNET and set(models[5:]) == {OPUS}
    tiers = [DEFAULT_MODELS.index(m) for m in models]
    assert tiers == sorted(tiers)
    guided = requests_with(fake_api, note)
    assert guided and guided[0] == len(models) - 1  # the request after the approval carries the note


def test_past_its_last_model_the_agent_asks_for_a_human_and_operator_text_reaches_the_model(
        lw: Harness, fake_api: FakeAnthropic) -> None:
    text = "the config lives in settings.toml"
    fake_api.play(_failing_until_guided(text, failures=1), max_turns=30)
    sid = start(lw, fake_api, "make the build pass", sets=("escalation.failures_per_model=1",),
                env={"LOOPWARDEN_AGENT_MODELS": "model-a"})
    snap = lw.wait_state(sid, "gated")
    assert ("gate", "gate_request") in rules(lw.verdicts(sid))
    [request] = [e["data"]["reason"] for e in lw.events(sid) if e["kind"] == "gate_request"]
    assert "past model-a" in request
    assert lw.request("inject", session=sid, text=text)["session"] == sid
    [gate] = snap["pending_gates"]
    assert lw.cli("approve", f"{sid}:{gate}").returncode == 0
    snap = lw.wait_state(sid, "exited", "terminated")
    assert (snap["state"], snap["exit_code"]) == ("exited", 0)
    assert set(fake_api.models()) == {"model-a"}
    guided = requests_with(fake_api, text)
    assert guided == [len(fake_api.messages) - 1]


def test_a_huge_output_is_spilled_and_the_model_gets_the_spill_message(lw: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play([call("bash", {"command": f"{sys.executable} -c \"print('x' * 50000)\""}), say("done")])
    sid = start(lw, fake_api, "show the log", sets=("spill.threshold_chars=1000",))
    snap = lw.wait_state(sid, "exited", "terminated")
    assert (snap["state"], snap["exit_code"]) == ("exited", 0)
    [spill] = [v for v in lw.verdicts(sid) if v["action"] == "spill"]
    path = spill["evidence"]["path"]
    assert os.path.getsize(path) == 50001
    [seen] = tool_results(fake_api.messages[1], last_only=True)
    assert path in result_text(seen) and len(result_text(seen)) < 5000


def test_no_api_key_is_one_line_and_exit_2() -> None:
    script = Path(sys.executable).parent / "loopwarden-agent"
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
    proc = subprocess.run([str(script), "fix the failing test"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("loopwarden-agent: ANTHROPIC_API_KEY is not set;")
    assert proc.stderr.count("\n") == 1


def test_an_api_error_is_one_line_and_a_non_zero_exit(fake_api: FakeAnthropic) -> None:
    fake_api.play([fail(401, "authentication_error", "invalid x-api-key")])
    secret = "sk-fake-SECRET-4711"
    env = {**os.environ, **fake_api.env(), "ANTHROPIC_API_KEY": secret}
    proc = subprocess.run([PY, *AGENT, "--no-handshake", "fix it"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 1
    assert proc.stderr == "loopwarden-agent: the API answered 401 authentication_error: invalid x-api-key\n"
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o["type"] for o in lines] == ["hello", "error"]
    assert secret not in proc.stdout + proc.stderr


def test_edit_file_needs_a_unique_match_and_bash_has_a_timeout(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x = 1\nx = 1\n")
    twice = run_tool("edit_file", {"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"}, tmp_path, 5)
    assert twice.failed and "occurs 2 times" in twice.output
    assert (tmp_path / "a.txt").read_text() == "x = 1\nx = 1\n"
    missing = run_tool("read_file", {}, tmp_path, 5)
    assert missing.failed and "needs a string 'path'" in missing.output
    slow = run_tool("bash", {"command": "echo started; sleep 30"}, tmp_path, 0.5)
    assert slow.failed and slow.output.startswith("started") and "timed out after 0.5s" in slow.output
