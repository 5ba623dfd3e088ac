"""Depth and size at their bounds, against a real daemon: no session crashes, no agent waits forever,
no tool call passes unjudged, and everyone watching keeps watching (issue 10, item 3).

Depths tried: the bound, one past it, past orjson's writer (254), at and past its reader (1024), far
beyond. A followed session must end with its own outcome, not `crashed`, and the daemon stays up.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

import orjson

from loopwarden.supervisor.bounds import (CUT_MARKER, MAX_DEPTH, MAX_HOOK_INPUT_BYTES, MAX_RECORD_DEPTH,
                                          MAX_REQUEST_BYTES, TOO_DEEP, depth_exceeds)
from loopwarden.runtime.subscribers import encode
from loopwarden.widgets.feed import Feed
from loopwarden.widgets.stream import render
from tests.claude_code_hook.helpers import denial, event, hooked, run_hook
from tests.support.nesting import depth_of, nest
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

AGENT = str(AGENTS / "deep_call.py")
DEEPER = [MAX_DEPTH + 1, 250, 255, 1023, 1024, 1025, 5000]


class Lines:
    """Every line a process writes to one of its pipes, read by a thread as it comes."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.lines: list[bytes] = []
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe: IO[bytes]) -> None:
        for line in pipe:
            self.lines.append(line)

    def text(self) -> str:
        return b"".join(self.lines).decode("utf-8", "replace")


def follow(lw: Harness, name: str, *agent_args: str, sets: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes],
                                                                                          Lines, Lines]:
    """`loopwarden run` attached to the deep_call agent, as a user runs it."""
    args = [PY, "-m", "loopwarden", "run", "--name", name, "--set", "validation.max_consecutive=0"]
    for setting in sets:
        args += ["--set", setting]
    run = subprocess.Popen([*args, "--", PY, AGENT, *agent_args], env=lw.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    assert run.stdout and run.stderr
    return run, Lines(run.stdout), Lines(run.stderr)


def release(go: Path, out: Lines) -> None:
    """Once the follower prints the agent's warm-up, it is subscribed: let the agent go on."""
    wait_for(lambda: "waiting for go" in out.text(), what="the follower to print the agent's stream")
    go.touch()


def session_named(lw: Harness, name: str) -> dict[str, Any]:
    [snap] = [s for s in lw.request("list") if s["name"] == name]
    return snap


def test_a_followed_session_ends_with_its_own_outcome_at_every_depth(lw: Harness, tmp_path: Path) -> None:
    console = Feed(lw.paths, events=True, autostart=False)  # the console's link to the daemon
    console.start()
    assert console.wait_ready() and console.error is None
    go = tmp_path / "go"
    run, out, err = follow(lw, "deep", "--go", str(go), f"depth={MAX_DEPTH}", *(f"depth={d}" for d in DEEPER))
    release(go, out)
    assert run.wait(60) == 0, err.text()  # the agent's own exit code: not crashed (18), not lost
    assert "session s1 exited" in err.text() and "crashed" not in err.text()
    # alive and answering; the ended session may have left memory for the store already (see history.py)
    assert lw.daemon is not None and lw.daemon.poll() is None and lw.request("ping")["live"] == 0

    snap = session_named(lw, "deep")
    assert (snap["state"], snap["exit_code"], snap["tool_calls"]) == ("exited", 0, 1)
    assert snap["validation_failures"] == len(DEEPER)
    rows = [e for e in lw.events(snap["id"]) if e["kind"] in ("tool_call", "invalid_line")]
    assert depth_of(rows[0]["data"]["args"]) == MAX_DEPTH - 1  # the row at the bound, written whole
    assert [e["data"].get("reason") for e in rows[1:]] == [TOO_DEEP] * len(DEEPER)

    wait_for(lambda: any(m.get("kind") == "session" and m["data"].get("state") == "exited"
                         for m in list(console.buffer)), what="the console to see the session end")
    messages = console.drain()
    assert console.error is None
    assert sum(m.get("kind") == "event" and m["data"].get("type") == "invalid_line" for m in messages) == len(DEEPER)
    for message in messages:
        render(message)  # every record the console gets, it can draw
    console.close()


def test_a_handshake_agent_gets_an_answer_for_every_call_at_and_past_each_bound(lw: Harness,
                                                                                  tmp_path: Path) -> None:
    limit = 64 << 10  # the deepest line here, 5000 levels, is 30 KB
    go = tmp_path / "go"
    specs = [f"depth={MAX_DEPTH}", *(f"depth={d}" for d in DEEPER), f"bytes={limit}", f"bytes={limit + 1}"]
    run, out, err = follow(lw, "shake", "--handshake", "--go", str(go), *specs,
                           sets=(f"limits.max_line_bytes={limit}",))
    release(go, out)
    assert run.wait(60) == 0, err.text()
    snap = session_named(lw, "shake")
    assert (snap["state"], snap["exit_code"]) == ("exited", 0)
    said = [e["data"]["text"] for e in lw.events(snap["id"]) if e["kind"] == "system_nudge"]
    assert said[0] == "c1 allow: None"
    for n in range(2, 2 + len(DEEPER)):
        assert said[n - 1].startswith(f"c{n} block: Tool call blocked: loopwarden could not read it ({TOO_DEEP})")
    assert said[-2] == f"c{len(specs) - 1} allow: None"  # a line of exactly the limit
    assert said[-1].startswith(f"c{len(specs)} block: Tool call blocked: its line is {limit + 1:,} bytes")
    assert len(said) == len(specs)


class Watcher:
    """A subscriber to every session's records, as an attached console or `run` is."""

    def __init__(self, lw: Harness) -> None:
        self.client = lw.client()
        _, updates = self.client.subscribe(None, events=True)
        self.messages: list[dict[str, Any]] = []
        threading.Thread(target=lambda: self.messages.extend(updates), daemon=True).start()


def deep_pre(depth: int, call: str) -> bytes:
    """A PreToolUse event nested `depth` levels deep (the event > tool_input ...), as raw JSON."""
    text = json.dumps(event("PreToolUse", tool_name="Edit", tool_input={"x": 0}, tool_use_id=call))
    return text.replace('{"x": 0}', '{"a":' * (depth - 2) + "{}" + "}" * (depth - 2)).encode()


def test_a_watched_hook_session_judges_every_deep_tool_input(lw: Harness) -> None:
    watcher = Watcher(lw)
    for depth in (MAX_DEPTH, *DEEPER):
        answer = run_hook(lw.env, deep_pre(depth, f"d{depth}"))
        assert (answer.code, answer.stderr, denial(answer)) == (0, "", None), depth  # answered by the daemon
    answers = [run_hook(lw.env, deep_pre(300, f"r{n}")) for n in range(6)]
    assert [denial(a) is None for a in answers] == [True] * 5 + [False]  # judged: the sixth repeat is denied
    assert "called 6 times" in str(denial(answers[-1]))

    [snap] = hooked(lw)
    calls = [e["data"] for e in lw.events(snap["id"]) if e["kind"] == "tool_call"]
    assert len(calls) == 1 + len(DEEPER) + 6 and snap["validation_failures"] == 0
    assert depth_of(calls[0]["args"]) == MAX_DEPTH - 1 and CUT_MARKER[:-1] not in json.dumps(calls[0])
    assert all(not depth_exceeds(c["args"], MAX_DEPTH - 1) and CUT_MARKER[:-1] in json.dumps(c) for c in calls[1:])
    assert len({json.dumps(c["args"]) for c in calls[:1 + len(DEEPER)]}) == 1 + len(DEEPER)  # told apart
    assert lw.daemon is not None and lw.daemon.poll() is None
    wait_for(lambda: sum(m.get("kind") == "event" for m in list(watcher.messages)) >= len(calls),
             what="the watcher to get every call")
    watcher.client.close()


def test_a_watched_hook_session_judges_every_huge_tool_input(lw: Harness) -> None:
    watcher = Watcher(lw)
    huge = [
        {"content": "x" * (3 << 20)},  # one long string, cut with its length and digest
        {f"k{n}": "v" for n in range(150_000)},  # a multitude of keys: over the request limit before
        {"edits": [[str(n)] * 300 for n in range(1000)]},  # small values everywhere: only the names remain
    ]
    for n, tool_input in enumerate(huge):
        answer = run_hook(lw.env, event("PreToolUse", tool_name="Write", tool_input=tool_input, tool_use_id=f"h{n}"))
        assert (answer.code, answer.stderr) == (0, ""), n
    head = event("PreToolUse", tool_name="Write", tool_input={"content": ""}, tool_use_id="h-unread")
    unread = json.dumps(head).replace('"content": ""', '"content": "' + "x" * MAX_HOOK_INPUT_BYTES + '"').encode()
    answer = run_hook(lw.env, unread, timeout=120)  # over what the hook reads at all
    assert (answer.code, answer.stderr) == (0, "")

    [snap] = hooked(lw)
    calls = [e["data"] for e in lw.events(snap["id"]) if e["kind"] == "tool_call"]
    assert [c.get("call_id") for c in calls] == ["h0", "h1", "h2", None]  # the unread one: named in its tail
    assert all("by loopwarden" in json.dumps(c["args"]) for c in calls)
    assert f"is {len(unread):,} bytes, over the {MAX_HOOK_INPUT_BYTES:,}-byte limit" in calls[3]["args"]["loopwarden"]
    assert lw.daemon is not None and lw.daemon.poll() is None
    watcher.client.close()


def test_a_request_at_the_daemons_limit_is_answered_and_a_larger_one_refused(lw: Harness) -> None:
    def ask(size: int) -> dict[str, Any]:
        head = b'{"id":1,"op":"ping","pad":"'
        line = head + b"x" * (size - len(head) - 2) + b'"}'
        assert len(line) == size
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(20)
            sock.connect(str(lw.paths.socket))
            try:
                sock.sendall(line + b"\n")
            except BrokenPipeError:  # the daemon answered and hung up before taking it all
                pass
            return json.loads(sock.makefile("rb").readline())

    assert ask(MAX_REQUEST_BYTES)["ok"] is True
    refused = ask(2 * MAX_REQUEST_BYTES)
    assert refused["ok"] is False and f"longer than {MAX_REQUEST_BYTES:,} bytes" in refused["error"]


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_the_broadcast_never_raises_whatever_the_record() -> None:
    for data, clipped in [({"type": "tool_call", "args": nest(MAX_DEPTH - 1, key="a")}, False),
                          ({"type": "tool_call", "args": nest(252, key="a")}, False),  # 254 with the envelope
                          ({"type": "tool_call", "args": nest(253, key="a")}, True),
                          ({"args": nest(5000, key="a")}, True),
                          ({"type": "x", "text": "\ud800"}, True), ({"type": "x", "v": Unprintable()}, True),
                          ({"type": "x", "seq": 2**80, "v": nest(300, key="a")}, True)]:
        message, trouble = encode("event", "s1", data)
        assert (trouble is not None) is clipped
        sent = orjson.loads(message)
        assert sent["session"] == "s1"
        assert not clipped or depth_of(sent) <= MAX_RECORD_DEPTH + 1  # the record, inside its message
        render(sent)
