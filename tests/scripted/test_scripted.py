"""The scripted agent and its bundled scenarios, run as real subprocesses against a tiny fake supervisor.

The fake supervisor is the engine (SessionHealth, default config plus the
scenario header's overrides) with just enough of a shell around it: it answers
`hello` with a welcome, each tool_call with allow or block, holds verdicts while
a gate is open, spills large results, injects nudges and sends `stop` on a
terminate. Every wait polls against a deadline.
"""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopwarden.replay import Replayer
from loopwarden.sessions import scripted
from loopwarden.supervisor import protocol
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.events import Event, Hello, InvalidLine, ToolCall, ToolResult
from loopwarden.supervisor.health import SessionHealth
from loopwarden.supervisor.verdicts import Action, Verdict
from tests.support.paths import AGENTS
from tests.support.waiting import wait_for

DEADLINE = 90.0
INJECT_KINDS = {Action.NUDGE: "nudge", Action.FORCE_NEXT: "force_next",
                Action.UNBLOCK_AUTHORITY: "authority", Action.ESCALATE: "escalate"}


def _reader(stream: Any, sink: queue.Queue[bytes | None]) -> None:
    for line in iter(stream.readline, b""):
        sink.put(line.rstrip(b"\n"))
    sink.put(None)


@dataclass
class Seen:
    """One non-allow verdict, with how many tool calls the agent had made when it came."""

    verdict: Verdict
    calls: int
    source: str  # the event kind, "tick" or "decide"
    at: float
    events: int = 0  # how many events the supervisor had read when it came


@dataclass
class Run:
    code: int
    seen: list[Seen]
    events: list[Event]
    lines: list[bytes]
    sent: list[tuple[float, dict[str, Any]]]
    stderr: str
    health: SessionHealth
    gate_decided_at: float | None = None
    elapsed: float = 0.0

    def verdicts(self, action: str | None = None, rule: str | None = None) -> list[Seen]:
        return [s for s in self.seen if (action is None or s.verdict.action == action)
                and (rule is None or s.verdict.rule == rule)]

    def summary(self) -> list[tuple[str, str, int]]:
        return [(str(s.verdict.action), s.verdict.rule, s.calls) for s in self.seen]

    def count(self, kind: type[Event]) -> int:
        return sum(type(e) is kind for e in self.events)

    def sent_of(self, kind: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, m) for t, m in self.sent if m["type"] == kind]


class FakeSupervisor:
    """Drives one agent process with the engine; `decide_after` seconds after a gate opens, decides it."""

    def __init__(self, argv: list[str], sets: list[str] | tuple[str, ...] = (), *, approve: bool = True,
                 decide_after: float = 0.3, deadline: float = DEADLINE) -> None:
        self.argv = argv
        self.config = load_config(env={}, sets=list(sets))
        self.health = SessionHealth(self.config)
        self.approve = approve
        self.decide_after = decide_after
        self.deadline = deadline
        self.seen: list[Seen] = []
        self.events: list[Event] = []
        self.lines: list[bytes] = []
        self.sent: list[tuple[float, dict[str, Any]]] = []
        self.calls = 0
        self.handshake = False
        self.held: list[ToolCall] = []
        self.gate_at: dict[str, float] = {}
        self.gate_decided_at: float | None = None
        self.stopped = False

    def send(self, message: dict[str, Any]) -> None:
        self.sent.append((time.time(), message))
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, ValueError):
            pass

    def run(self) -> Run:
        start = time.time()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        out: queue.Queue[bytes | None] = queue.Queue()
        err: queue.Queue[bytes | None] = queue.Queue()
        threads = [threading.Thread(target=_reader, args=(self.proc.stdout, out), daemon=True),
                   threading.Thread(target=_reader, args=(self.proc.stderr, err), daemon=True)]
        for t in threads:
            t.start()
        seq = 0
        try:
            while True:
                now = time.time()
                assert now - start < self.deadline, f"the agent did not finish in {self.deadline}s: {self.summary()}"
                self._verdicts(self.health.tick(now), "tick")
                self._decide_gates(now)
                try:
                    line = out.get(timeout=0.02)
                except queue.Empty:
                    continue
                if line is None:
                    break
                seq += 1
                self.lines.append(line)
                event = protocol.parse_line(line, seq)
                self.events.append(event)
                if type(event) is ToolCall:
                    self.calls += 1
                verdicts = self.health.observe(event, time.time())
                self._respond(event, verdicts)
            code = self.proc.wait(timeout=max(0.1, self.deadline - (time.time() - start)))
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for t in threads:
                t.join(timeout=2)
        stderr_lines = []
        while not err.empty():
            item = err.get()
            if item is not None:
                stderr_lines.append(item.decode("utf-8", "replace"))
        return Run(code, self.seen, self.events, self.lines, self.sent, "\n".join(stderr_lines), self.health,
                   self.gate_decided_at, time.time() - start)

    def summary(self) -> list[tuple[str, str, int]]:
        return [(str(s.verdict.action), s.verdict.rule, s.calls) for s in self.seen]

    def _respond(self, event: Event, verdicts: list[Verdict]) -> None:
        if type(event) is Hello and event.handshake:
            self.handshake = True
            self.send({"type": "welcome", "protocol": 1, "session": "t1",
                       "spill_threshold": self.config.spill.threshold_chars})
        self._verdicts(verdicts, event.kind, event)
        if self.stopped or not self.handshake:
            return
        if type(event) is ToolCall:
            block = next((v for v in verdicts if v.action == Action.BLOCK), None)
            if block is not None:
                self.send({"type": "verdict", "call_id": event.call_id, "seq": event.seq, "action": "block",
                           "message": block.message})
            elif self.health.pending_gates():
                self.held.append(event)
            else:
                self._allow(event)

    def _allow(self, call: ToolCall) -> None:
        self.send({"type": "verdict", "call_id": call.call_id, "seq": call.seq, "action": "allow", "message": None})

    def _verdicts(self, verdicts: list[Verdict], source: str, event: Event | None = None) -> None:
        for v in verdicts:
            self.seen.append(Seen(v, self.calls, source, time.time(), len(self.events)))
            if v.gate_id is not None and v.action != Action.TERMINATE:
                self.gate_at.setdefault(v.gate_id, time.time() + self.decide_after)
            if v.action == Action.TERMINATE and not self.stopped:
                self.stopped = True
                self.send({"type": "stop", "reason": str(v.termination), "message": v.message})
            elif v.action == Action.SPILL and self.handshake and isinstance(event, ToolResult):
                self.send({"type": "spill", "call_id": event.call_id, "seq": event.seq,
                           "path": "/nonexistent/spill.txt", "size": len(event.output),
                           "message": f"Tool response too large ({len(event.output)} characters)"})
            elif v.action in INJECT_KINDS and v.message and not self.stopped:
                message = {"type": "inject", "kind": INJECT_KINDS[v.action], "rule": v.rule, "text": v.message}
                if v.action == Action.ESCALATE:
                    message["model"] = v.target
                self.send(message)

    def _decide_gates(self, now: float) -> None:
        for gate_id, at in list(self.gate_at.items()):
            if now < at or self.stopped:
                continue
            del self.gate_at[gate_id]
            self.gate_decided_at = now
            self._verdicts(self.health.decide(gate_id, self.approve, now, by="test"), "decide")
            if not self.stopped and not self.health.pending_gates():
                held, self.held = self.held, []
                for call in held:
                    self._allow(call)


def scripted_argv(scenario: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "loopwarden.sessions.scripted", scenario, *extra]


def play(name: str, **kwargs: Any) -> Run:
    scenario = scripted.load_scenario(name)
    return FakeSupervisor(scripted_argv(name), scenario.config, **kwargs).run()


def replay(run: Run, sets: tuple[str, ...]) -> tuple[list[Verdict], SessionHealth]:
    """The stream the agent wrote, replayed offline with the same config (time from the events' ts)."""
    found: list[Verdict] = []
    replayer = Replayer(load_config(env={}, sets=list(sets)))
    replayer.run(io.BytesIO(b"\n".join(run.lines) + b"\n"), "native", found.append)
    return found, replayer.health


def assert_clean_exit(run: Run) -> None:
    assert run.code == 0, run.stderr
    assert not any(isinstance(e, InvalidLine) for e in run.events)


def assert_finished(run: Run) -> None:
    assert_clean_exit(run)
    assert run.health.state == "done", (run.health.state, [(s.verdict.action, s.verdict.rule) for s in run.seen])
    assert run.events[-1].kind == "done"


# ---- one behaviour per bundled scenario --------------------------------------

def check_repetition(run: Run) -> None:
    assert run.summary() == [("nudge", "repetition", 2), ("block", "repetition", 6), ("block", "repetition", 7),
                             ("block", "repetition", 8), ("terminate", "repetition", 9)]
    assert run.seen[-1].verdict.termination == "repetition_loop"
    assert run.count(ToolResult) == 5  # calls 1-5 ran; 6-8 were blocked; 9 was stopped
    assert len({e.output for e in run.events if type(e) is ToolResult}) == 1
    assert_clean_exit(run)
    assert "stopped (repetition_loop" in run.stderr


def check_same_error(run: Run) -> None:
    assert run.summary() == [("block", "same_error", 4)]
    calls = [e for e in run.events if type(e) is ToolCall]
    assert len({json.dumps(c.args, sort_keys=True) for c in calls[:4]}) == 4  # varying arguments
    assert "c4 (run_tests) blocked" in run.stderr
    assert not any(type(e) is ToolResult and e.call_id == "c4" for e in run.events)
    assert_finished(run)


def check_alternation(run: Run) -> None:
    assert run.summary() == [("nudge", "alternation", 6), ("block", "alternation", 13)]
    assert "c13 (read_file) blocked" in run.stderr
    assert_finished(run)


def check_validation(run: Run) -> None:
    assert run.summary() == [("nudge", "validation", 0), ("nudge", "validation", 0),
                             ("terminate", "validation", 0)]
    assert run.seen[-1].verdict.termination == "validation_failure"
    assert sum(isinstance(e, InvalidLine) for e in run.events) == 3
    assert run.code == 0 and "stopped (validation_failure" in run.stderr


def check_stall(run: Run) -> None:
    [stall] = run.verdicts("nudge", "stall")
    assert run.summary() == [("nudge", "stall", 1)]
    call = next(e for e in run.events if type(e) is ToolCall)
    result = next(e for e in run.events if type(e) is ToolResult)
    assert call.ts + 1.0 <= stall.at  # after the 1 s timeout
    # inside the slow call: the call was the last event read, and the result came after (by order, not by
    # time, which a busy machine stretches)
    assert stall.source == "tick" and run.events[stall.events - 1] is call
    assert run.events.index(result) >= stall.events
    assert_finished(run)


def check_max_runtime(run: Run) -> None:
    assert run.summary()[:-1] == [] and run.summary()[-1][:2] == ("terminate", "runtime")
    assert run.seen[-1].verdict.termination == "max_runtime"  # from a tick, or from the event that came late
    calls = [e for e in run.events if type(e) is ToolCall]
    assert len(calls) >= 4 and len({json.dumps(c.args, sort_keys=True) for c in calls}) == len(calls)
    stop = run.seen[-1]
    assert stop.verdict.evidence["elapsed"] >= 3.0  # not before the limit
    # and it stopped when told: at most the call already on its way came after the stop (counted, not timed)
    assert len(calls) - stop.calls <= 1
    assert run.code == 0 and "stopped (max_runtime" in run.stderr


def check_huge_output(run: Run) -> None:
    assert run.summary() == [("spill", "large_output", 1)]
    big = next(e for e in run.events if type(e) is ToolResult)
    assert len(big.output) == 300_000 and not big.failed
    assert [m["call_id"] for _, m in run.sent_of("spill")] == ["c1"]
    assert "c1 output spilled to /nonexistent/spill.txt (300000 characters)" in run.stderr
    assert_finished(run)


def check_loop_gate(run: Run) -> None:
    assert run.summary() == [("gate", "loop_counter", 4)]
    errors = [e for e in run.events if e.kind == "error"]
    gate_seq = run.seen[0].verdict.seq
    assert len(errors) == 4 and errors[-1].seq == gate_seq and {e.task for e in errors} == {"T-3"}
    held_call = next(e for e in run.events if type(e) is ToolCall and e.seq > gate_seq)
    [(sent_at, verdict)] = [(t, m) for t, m in run.sent_of("verdict") if m["call_id"] == held_call.call_id]
    assert verdict["action"] == "allow" and run.gate_decided_at is not None and sent_at >= run.gate_decided_at
    result = next(e for e in run.events if type(e) is ToolResult and e.call_id == held_call.call_id)
    assert result.ts >= run.gate_decided_at
    assert_finished(run)


def check_gate_request(run: Run) -> None:
    assert run.summary() == [("gate", "gate_request", 0)]
    [call] = [e for e in run.events if type(e) is ToolCall]
    [(sent_at, verdict)] = run.sent_of("verdict")
    assert verdict["call_id"] == call.call_id and verdict["action"] == "allow"
    assert run.gate_decided_at is not None and sent_at >= run.gate_decided_at
    assert_finished(run)


def check_blocked_spin(run: Run) -> None:
    assert run.summary() == [("unblock_authority", "blocked_task_spin", 3)]
    assert [m["kind"] for _, m in run.sent_of("inject")] == ["authority"]
    assert "waited for inject: got it" in run.stderr
    grant = run.seen[0].at
    after = [e for e in run.events if e.kind == "assistant_message"]
    assert after and after[-1].ts >= grant  # it went on only once the authority had arrived
    assert_finished(run)


def check_healthy(run: Run) -> None:
    assert run.summary() == []
    kinds = {e.kind for e in run.events}
    assert {"tool_call", "tool_result", "test_result", "iteration", "usage", "attempt", "done"} <= kinds
    assert_finished(run)


CHECKS: dict[str, Callable[[Run], None]] = {
    "repetition": check_repetition, "same_error": check_same_error, "alternation": check_alternation,
    "validation": check_validation, "stall": check_stall, "max_runtime": check_max_runtime,
    "huge_output": check_huge_output, "loop_gate": check_loop_gate, "gate_request": check_gate_request,
    "blocked_spin": check_blocked_spin, "healthy": check_healthy,
}


def test_every_bundled_scenario_has_a_live_check() -> None:
    assert sorted(CHECKS) == scripted.bundled()


# What `loopwarden replay` says about the stream the agent wrote, with the same config. Time comes
# from the events' `ts`, so the stall shows up at the first event after the silence, and gates stay
# pending (nobody decides them offline). max_runtime is missing: the live session was ended by a
# tick 3 s after the supervisor started, and the recorded stream stops just before 3 s of `ts`.
OFFLINE_EXPECTED = {
    "repetition": [("nudge", "repetition"), ("block", "repetition"), ("block", "repetition"),
                   ("block", "repetition"), ("terminate", "repetition")],
    "same_error": [("block", "same_error")],
    "alternation": [("nudge", "alternation"), ("block", "alternation")],
    "validation": [("nudge", "validation"), ("nudge", "validation"), ("terminate", "validation")],
    "stall": [("nudge", "stall")],
    "huge_output": [("spill", "large_output")],
    "loop_gate": [("gate", "loop_counter")],
    "gate_request": [("gate", "gate_request")],
    "blocked_spin": [("unblock_authority", "blocked_task_spin")],
    "healthy": [],
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_bundled_scenario_triggers_its_behaviour_live_and_offline(name: str) -> None:
    run = play(name)
    CHECKS[name](run)
    assert "scripted: <- " in run.stderr and '"type": "welcome"' in run.stderr
    if name in OFFLINE_EXPECTED:
        found, _ = replay(run, scripted.load_scenario(name).config)
        assert [(str(v.action), v.rule) for v in found] == OFFLINE_EXPECTED[name]


# ---- the header's config is needed, and is all that is needed ----------------------

@pytest.mark.parametrize("name", ["stall", "max_runtime"])
def test_timing_scenarios_need_their_header_config(name: str) -> None:
    scenario = scripted.load_scenario(name)
    assert scenario.config  # and without it, the defaults (30 s, 4 h) would never fire in a test
    default = load_config(env={})
    tuned = load_config(env={}, sets=list(scenario.config))
    assert tuned.to_dict() != default.to_dict()


def test_headers_are_valid_and_named_after_their_files() -> None:
    for name in scripted.bundled():
        scenario = scripted.load_scenario(name)
        assert scenario.name == name and scenario.description and scenario.handshake
        load_config(env={}, sets=list(scenario.config))  # every override is a real key


def test_gate_request_denied_ends_the_session_and_the_held_call_never_runs() -> None:
    run = play("gate_request", approve=False, decide_after=0.2)
    assert run.summary() == [("gate", "gate_request", 0), ("terminate", "gate", 1)]
    assert run.seen[-1].verdict.termination == "loop_gate_denied"
    assert run.sent_of("verdict") == [] and run.count(ToolResult) == 0
    assert run.code == 0 and "stopped (loop_gate_denied" in run.stderr


# ---- the agent's side of the protocol ----------------------------------------------


class Agent:
    """A scripted agent process driven by hand."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out: queue.Queue[bytes | None] = queue.Queue()
        self.err: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: list[str] = []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=_reader, args=(stream, sink), daemon=True).start()

    def line(self, timeout: float = 30.0) -> dict[str, Any] | None:
        item = self.out.get(timeout=timeout)
        return None if item is None else json.loads(item)

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def wait_stderr(self, needle: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(needle in s for s in self.stderr):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{needle!r} not in stderr: {self.stderr}"
            try:
                item = self.err.get(timeout=remaining)
            except queue.Empty:
                continue
            if item is not None:
                self.stderr.append(item.decode())

    def finish(self, timeout: float = 30.0) -> int:
        code = self.proc.wait(timeout=timeout)
        while True:
            try:
                item = self.err.get(timeout=1)
            except queue.Empty:
                break
            if item is None:
                break
            self.stderr.append(item.decode())
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


Start = Callable[..., Agent]


@pytest.fixture
def agent_factory() -> Iterator[Start]:
    started: list[Agent] = []

    def start(*argv: str) -> Agent:
        agent = Agent(list(argv))
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.close()


def write_scenario(tmp_path: Path, *steps: dict[str, Any], handshake: bool = True) -> str:
    path = tmp_path / "s.jsonl"
    header = {"scenario": "t", "description": "test", "handshake": handshake, "config": []}
    path.write_text("\n".join(json.dumps(o) for o in (header, *steps)) + "\n", encoding="utf-8")
    return str(path)


CALL = {"call": {"tool": "bash", "args": {"command": "ls"}}, "result": {"output": "a b"}}


def test_malformed_stdin_lines_and_injects_never_end_the_wait(tmp_path: Path, agent_factory: Start) -> None:
    agent = agent_factory(*scripted_argv(write_scenario(tmp_path, CALL, {"emit": {"type": "done"}})))
    hello = agent.line()
    assert hello is not None and hello["type"] == "hello" and hello["handshake"] is True
    for junk in ("not json", "[1, 2]", '{"no": "type"}', "", '{"type": "teleport"}'):
        agent.send(junk)
    agent.proc.stdin.write(b"\xff\xfe not utf-8\n")  # type: ignore[union-attr]
    agent.send('{"type":"welcome","protocol":1,"session":"s","spill_threshold":10}')
    call = agent.line()
    assert call is not None and call["type"] == "tool_call" and call["call_id"] == "c1" and "ts" in call
    agent.send('{"type":"inject","kind":"nudge","rule":"test","text":"hi"}')
    agent.send('{"type":"verdict","call_id":"c999","action":"block","message":"not yours"}')
    agent.send("{broken")
    agent.wait_stderr("<- {broken")
    assert agent.proc.poll() is None
    agent.send('{"type":"verdict","call_id":"c1","seq":2,"action":"allow","message":null}')
    result = agent.line()
    assert result is not None and result["type"] == "tool_result" and result["call_id"] == "c1"
    assert result["output"] == "a b" and result["tool"] == "bash"
    assert agent.line()["type"] == "done"  # type: ignore[index]
    assert agent.finish() == 0
    text = "\n".join(agent.stderr)
    assert "scripted: <- not json" in text and "ignoring a malformed line" in text
    assert "inject (nudge, test): hi" in text


def test_eof_while_waiting_for_a_verdict_exits_3(tmp_path: Path, agent_factory: Start) -> None:
    agent = agent_factory(*scripted_argv(write_scenario(tmp_path, CALL)))
    assert agent.line()["type"] == "hello"  # type: ignore[index]
    agent.send('{"type":"welcome","protocol":1,"session":"s","spill_threshold":0}')
    assert agent.line()["type"] == "tool_call"  # type: ignore[index]
    agent.proc.stdin.close()  # type: ignore[union-attr]
    assert agent.finish() == 3
    assert any("stdin closed while waiting for the verdict on c1" in s for s in agent.stderr)


def test_eof_before_the_welcome_exits_3(tmp_path: Path) -> None:
    proc = subprocess.run(scripted_argv(write_scenario(tmp_path, CALL)), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=10)
    assert proc.returncode == 3 and b"waiting for the welcome" in proc.stderr


def test_stop_cuts_a_sleep_short_and_exits_0(tmp_path: Path, agent_factory: Start) -> None:
    agent = agent_factory(*scripted_argv(write_scenario(tmp_path, {"sleep": 60}, {"emit": {"type": "done"}})))
    assert agent.line()["type"] == "hello"  # type: ignore[index]
    agent.send('{"type":"welcome","protocol":1,"session":"s","spill_threshold":0}')
    agent.wait_stderr("speed 1")
    started = time.monotonic()
    agent.send('{"type":"stop","reason":"operator","message":"bye"}')
    assert agent.finish() == 0 and time.monotonic() - started < 30  # cut short: well under the 60 s sleep
    assert agent.line() is None  # no done: it stopped mid-sleep
    assert any("stopped (operator: bye)" in s for s in agent.stderr)


def test_stop_while_waiting_for_a_verdict_exits_0(tmp_path: Path, agent_factory: Start) -> None:
    agent = agent_factory(*scripted_argv(write_scenario(tmp_path, CALL)))
    agent.line()
    agent.send('{"type":"welcome","protocol":1,"session":"s","spill_threshold":0}')
    assert agent.line()["type"] == "tool_call"  # type: ignore[index]
    agent.send('{"type":"stop","reason":"max_runtime","message":"session terminated"}')
    assert agent.finish() == 0 and agent.line() is None


@pytest.mark.parametrize("stop_first, code", [(True, 0), (False, 143)])
def test_sigterm_right_after_stop_still_exits_0(tmp_path: Path, agent_factory: Start, stop_first: bool,
                                                code: int) -> None:
    """The real supervisor sends `stop` and SIGTERM back to back; a bare SIGTERM is 143."""
    agent = agent_factory(*scripted_argv(write_scenario(tmp_path, {"sleep": 60})))
    assert agent.line()["type"] == "hello"  # type: ignore[index]
    agent.send('{"type":"welcome","protocol":1,"session":"s","spill_threshold":0}')
    agent.wait_stderr("<- {\"type\":\"welcome\"")
    if stop_first:
        agent.send('{"type":"stop","reason":"max_runtime","message":"bye"}')
    agent.proc.send_signal(signal.SIGTERM)
    assert agent.finish() == code


def test_without_handshake_the_whole_script_runs_with_stdin_closed_and_every_line_is_valid() -> None:
    proc = subprocess.run(scripted_argv("healthy", "--no-handshake", "--speed", "inf"),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    events = [protocol.parse_line(line, i) for i, line in enumerate(lines, 1)]
    assert not [e for e in events if isinstance(e, InvalidLine)]
    assert events[0].kind == "hello" and events[0].handshake is False  # type: ignore[attr-defined]
    assert events[-1].kind == "done"
    assert all(json.loads(line)["ts"] > 0 for line in lines)


def test_speed_scales_sleeps(tmp_path: Path) -> None:
    # 120 s of scenario sleep at speed 100 is 1.2 s; finishing in under half the unscaled sleep shows it was
    # scaled, with a margin no busy machine eats
    path = write_scenario(tmp_path, {"sleep": 120}, {"emit": {"type": "done"}}, handshake=False)
    started = time.monotonic()
    proc = subprocess.run(scripted_argv(path, "--speed", "100"), stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=60)
    assert proc.returncode == 0 and time.monotonic() - started < 60


def test_until_stopped_repeats_with_fresh_placeholders_until_stop(tmp_path: Path, agent_factory: Start) -> None:
    steps = {"until_stopped": True, "steps": [
        {"call": {"tool": "read", "args": {"path": "f{i}", "call": "{n}"}}, "result": {"output": "x{n}"}}]}
    agent = agent_factory(*scripted_argv(write_scenario(tmp_path, steps)))
    agent.line()
    agent.send('{"type":"welcome","protocol":1,"session":"s","spill_threshold":0}')
    for n in (1, 2, 3):
        call = agent.line()
        assert call is not None and call["args"] == {"path": f"f{n}", "call": str(n)}
        agent.send(json.dumps({"type": "verdict", "call_id": call["call_id"], "action": "allow", "message": None}))
        assert agent.line()["output"] == f"x{n}"  # type: ignore[index]
    assert agent.line()["type"] == "tool_call"  # type: ignore[index]
    agent.send('{"type":"stop","reason":"operator","message":null}')
    assert agent.finish() == 0


def test_output_chars_and_spill_wait(tmp_path: Path, agent_factory: Start) -> None:
    step = {"call": {"tool": "logs", "args": {}}, "result": {"output": "abc", "output_chars": 25}}
    agent = agent_factory(*scripted_argv(write_scenario(tmp_path, step, {"emit": {"type": "done"}})))
    agent.line()
    agent.send('{"type":"welcome","protocol":1,"session":"s","spill_threshold":20}')
    agent.line()
    agent.send('{"type":"verdict","call_id":"c1","action":"allow","message":null}')
    result = agent.line()
    assert result is not None and result["output"] == ("abc" * 9)[:25]
    with pytest.raises(queue.Empty):  # it waits for the spill line before going on
        agent.out.get(timeout=0.3)
    agent.send('{"type":"spill","call_id":"c1","seq":3,"path":"/x","size":25,"message":"m"}')
    assert agent.line()["type"] == "done"  # type: ignore[index]
    assert agent.finish() == 0


def test_wait_for_counts_a_line_that_already_arrived(tmp_path: Path, agent_factory: Start) -> None:
    path = write_scenario(tmp_path, CALL, {"wait_for": "inject", "where": {"kind": "authority"}},
                          {"emit": {"type": "done"}})
    agent = agent_factory(*scripted_argv(path))
    agent.line()
    agent.send('{"type":"welcome","protocol":1,"session":"s","spill_threshold":0}')
    agent.line()
    agent.send('{"type":"inject","kind":"nudge","rule":"r","text":"not this one"}')
    agent.send('{"type":"inject","kind":"authority","rule":"r","text":"go"}')
    agent.send('{"type":"verdict","call_id":"c1","action":"allow","message":null}')
    assert agent.line()["type"] == "tool_result"  # type: ignore[index]
    assert agent.line()["type"] == "done"  # type: ignore[index]
    assert agent.finish() == 0


@pytest.mark.parametrize("text, needle", [
    ("", "empty"),
    ('{"description": "x"}', "header needs"),
    ('{"scenario": "x"}\n{"sleep": -1}', ":2: sleep must be"),
    ('{"scenario": "x"}\n{"until_stopped": true}', "there is none"),
    ('{"scenario": "x"}\n{"sleep": 1}\n{"until_stopped": true}\n{"sleep": 1}', "must be the last"),
    ('{"scenario": "x"}\n{"call": {"tool": "t"}}', "call takes"),
    ('{"scenario": "x"}\n{"emit": {}, "sleep": 1}', "exactly one"),
    ('{"scenario": "x"}\n{"emit": {}, "bogus": 1}', "unknown key(s) bogus"),
    ('{"scenario": "x"}\n{"repeat": 2, "steps": [{"sleep": "x"}]}', "steps[0]"),
    ('{"scenario": "x", "config": ["nokey"]}', "config"),
    ('{"scenario": "x"}\nnot json', ":2: not valid JSON"),
])
def test_bad_scenarios_are_rejected_with_the_line(text: str, needle: str) -> None:
    with pytest.raises(scripted.ScenarioError, match=None) as info:
        scripted.parse_scenario(text, "f.jsonl")
    assert needle in str(info.value)


def test_command_line_errors_exit_2(tmp_path: Path) -> None:
    missing = subprocess.run(scripted_argv("no-such-scenario"), stdin=subprocess.DEVNULL, capture_output=True,
                             timeout=10)
    assert missing.returncode == 2 and b"healthy" in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"scenario": "x"}\n{"sleep": "long"}\n')
    assert subprocess.run(scripted_argv(str(bad)), capture_output=True, timeout=10).returncode == 2
    speed = subprocess.run(scripted_argv("healthy", "--speed", "0"), capture_output=True, timeout=10)
    assert speed.returncode == 2
    listing = subprocess.run([sys.executable, "-m", "loopwarden.sessions.scripted", "--list"],
                             capture_output=True, timeout=10)
    assert listing.returncode == 0
    assert [line.split()[0] for line in listing.stdout.decode().splitlines()] == scripted.bundled()


# ---- tests/agents ------------------------------------------------------------------

def test_flood_writes_n_valid_varied_events_then_done() -> None:
    proc = subprocess.run([sys.executable, str(AGENTS / "flood.py"), "500"], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=10)
    assert proc.returncode == 0
    events = [protocol.parse_line(line, i) for i, line in enumerate(proc.stdout.splitlines(), 1)]
    assert not [e for e in events if isinstance(e, InvalidLine)]
    assert events[0].kind == "hello" and events[-1].kind == "done" and len(events) == 502
    health = SessionHealth(load_config(env={}))
    verdicts = [v for e in events for v in health.observe(e, 0.0)]
    assert verdicts == [] and health.state == "done"


def test_echo_handshake_against_the_engine_counts_its_verdicts() -> None:
    run = FakeSupervisor([sys.executable, str(AGENTS / "echo_handshake.py"), "200"]).run()
    assert run.code == 0 and run.summary() == [] and run.count(ToolCall) == 200
    assert len(run.sent_of("verdict")) == 200
    assert "200 verdicts" in run.stderr and run.health.state == "done"


def test_plain_chatter_writes_to_both_streams() -> None:
    proc = subprocess.run([sys.executable, str(AGENTS / "plain_chatter.py")], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=10)
    assert proc.returncode == 0 and proc.stdout.strip() and proc.stderr.strip()
    events = [protocol.parse_line(line, i) for i, line in enumerate(proc.stdout.splitlines(), 1)]
    assert all(isinstance(e, InvalidLine) for e in events)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_ignore_sigterm_survives_sigterm_with_its_child_and_grandchild() -> None:
    proc = subprocess.Popen([sys.executable, str(AGENTS / "ignore_sigterm.py")], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    pids: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        hello = json.loads(proc.stdout.readline())
        assert hello["type"] == "hello"
        while len(pids) < 2:
            event = json.loads(proc.stdout.readline())
            assert event["type"] == "assistant_message"
            who, pid = event["text"].split()
            pids[who] = int(pid)
        assert set(pids) == {"child", "grandchild"}
        os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # nothing may die during half a second after SIGTERM
            assert proc.poll() is None and all(_alive(p) for p in pids.values())
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
    wait_for(lambda: not any(_alive(p) for p in pids.values()), 5, "SIGKILL to the group to leave no process behind")
