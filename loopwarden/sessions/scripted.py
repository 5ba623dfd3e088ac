"""A deterministic scripted agent that speaks the native protocol, driven by a scenario file.

It powers `loopwarden`'s demo and the live-session tests: no model, no API key,
no network, the same stream every time.

    python -m loopwarden.sessions.scripted SCENARIO [--speed X] [--pace S] [--no-handshake]
    python -m loopwarden.sessions.scripted --list

SCENARIO is the name of a bundled scenario (`repetition`, `healthy`, ...; see
`--list`) or the path of a scenario file. `--speed 2` halves every sleep (and
every `takes`); `--speed inf` skips them. `--pace 5` waits five seconds on
average before every line the agent writes (in a fixed rhythm of shorter and
longer pauses, like a model thinking), so a person can watch it (the demo).
`--no-handshake` overrides the header and runs the agent observed-only.

Scenario files
==============

JSON Lines. Blank lines and lines starting with `#` are skipped. The first
object is the header; every following object is one step.

Header::

    {"scenario": "repetition", "description": "...", "handshake": true,
     "config": ["limits.stall_timeout=1s"]}

- `scenario` (string, required): the name; for a bundled file it is the file's stem.
- `description` (string): one or two sentences: what the agent does, what it triggers.
- `handshake` (bool, default true): send `{"type":"hello","handshake":true}` and
  read the `welcome`; then every `call` waits for its verdict.
- `config` (list of strings, default []): the `--set KEY=VALUE` overrides the
  supervisor needs for the scenario to trigger its behaviour (short limits so
  tests stay fast). Everything else is the default config.

Steps (every step may also carry `"note": "..."`, logged to stderr when it runs):

- `{"emit": {EVENT}}`: write a native event. `ts` (time.time()) is added unless
  the object has one. The object is not validated, so an emit can be invalid on
  purpose.
- `{"call": {"tool": T, "args": {...}, ...}, "result": {"output": S, "is_error": B,
  "exit_code": N, "output_chars": N}, "takes": SECONDS}`: write a `tool_call`
  (`call_id` "c1", "c2", ... in order; extra fields such as `task` pass through).
  With the handshake, wait for its `verdict` (no timeout: a human gate may hold
  it). On `block`, log the message and skip the result. Otherwise sleep `takes`
  (scaled by --speed; the tool "runs"), then write the `tool_result` (with `tool`
  and `call_id` added) if the step has a `result`. `output_chars` repeats
  `output` cyclically to exactly that many characters (for huge outputs). With
  the handshake, a result longer than the welcome's `spill_threshold` is
  followed by a wait for the `spill` line.
- `{"sleep": SECONDS}`: wait (scaled by --speed). stdin is still read: `stop` ends it.
- `{"repeat": N, "steps": [...]}`: run the steps N times.
- `{"raw": "text"}`: write the text and a newline as is (to produce invalid lines).
- `{"until_stopped": true}`: repeat the previous step (often a `repeat` group)
  until a `stop` line arrives or stdin closes. `{"until_stopped": true, "steps":
  [...]}` repeats its own steps instead. It must be the last step of its list.
- `{"wait_for": TYPE, "where": {FIELD: VALUE}, "timeout": SECONDS}`: wait for a
  stdin line of that type (e.g. `inject`, or `stop`) whose fields match `where`.
  A matching line that already arrived since the previous `wait_for` counts.
  `timeout` (not scaled) is optional; when it passes, or stdin closes, the
  script goes on. Without `timeout`, a closed stdin is exit 3.

In strings of `emit`, `call` and `result`, `{n}` becomes the number of the
current (or, in an emit, the latest) tool call and `{i}` the 1-based iteration
of the innermost `repeat` / `until_stopped` (1 outside any loop).

The agent's side of the protocol
================================

Every stdout line is one JSON object (`raw` steps aside), written with a single
flush; the first is `hello`. Every stdin line is logged to
stderr as `scripted: <- LINE`; a malformed one is logged and ignored. `inject`
lines are logged wherever they arrive (also while waiting for a verdict). A
`stop` line ends the agent at once with exit 0, whatever it was doing.

Exit codes: 0 at the end of the script or on `stop`; 2 for a bad command line
or scenario file; 3 when stdin closes while the agent waits for a reply (the
welcome, a verdict, a spill line, a `wait_for` without timeout, or a `stop`
during `until_stopped`), or when stdout is closed. The supervisor follows a
`stop` with SIGTERM to the process group: the command-line agent then exits at
once, with 0 when the `stop` line had already arrived, else 143.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO, TextIO

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_CLOSED = 3
EXIT_SIGTERM = 128 + signal.SIGTERM
PREFIX = "scripted: "
_IDLE_FLOOR = 0.01  # an until_stopped pass that never waited still yields this long
_SEEN_KEPT = 1000  # stdin lines kept for wait_for


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message names the file and line."""


class _Stopped(Exception):
    """A `stop` line arrived."""


class _Closed(Exception):
    """stdin closed (or stdout broke) while the agent needed the supervisor."""


# ---- scenarios -------------------------------------------------------------

@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    handshake: bool
    config: tuple[str, ...]
    steps: tuple[dict[str, Any], ...]
    source: str


def _scenario_dir() -> Any:
    return resources.files("loopwarden.sessions") / "scenarios"


def bundled() -> list[str]:
    """Names of the bundled scenarios, sorted."""
    return sorted(p.name[:-6] for p in _scenario_dir().iterdir() if p.name.endswith(".jsonl"))


def load_scenario(name_or_path: str | os.PathLike[str]) -> Scenario:
    """A bundled scenario by name, or a scenario file by path (raises ScenarioError)."""
    text_name = os.fspath(name_or_path)
    path = Path(text_name)
    if path.is_file():
        try:
            return parse_scenario(path.read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise ScenarioError(f"{path}: cannot read it ({exc})") from None
    if text_name in bundled():
        resource = _scenario_dir() / f"{text_name}.jsonl"
        return parse_scenario(resource.read_text(encoding="utf-8"), f"{text_name}.jsonl")
    raise ScenarioError(f"no scenario {text_name!r}: not a file, and the bundled ones are {', '.join(bundled())}")


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    """Parse and check a whole scenario file."""
    objects: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            objects.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ScenarioError(f"{source}:{number}: not valid JSON ({exc.msg})") from None
    if not objects:
        raise ScenarioError(f"{source}: empty; the first line must be a header")
    number, header = objects[0]
    where = f"{source}:{number}"
    if not isinstance(header, dict) or not isinstance(header.get("scenario"), str) or not header["scenario"]:
        raise ScenarioError(f'{where}: the header needs "scenario": NAME')
    description = header.get("description", "")
    handshake = header.get("handshake", True)
    config = header.get("config", [])
    if not isinstance(description, str):
        raise ScenarioError(f'{where}: "description" must be a string')
    if not isinstance(handshake, bool):
        raise ScenarioError(f'{where}: "handshake" must be true or false')
    if not isinstance(config, list) or not all(isinstance(c, str) and "=" in c for c in config):
        raise ScenarioError(f'{where}: "config" must be a list of "section.key=value" strings')
    steps = []
    for number, step in objects[1:]:
        _check_step(step, f"{source}:{number}")
        steps.append(step)
    _check_list(steps, f"{source}")
    return Scenario(header["scenario"], description, handshake, tuple(config), tuple(steps), source)


_STEP_KEYS = {
    "emit": {"emit"},
    "call": {"call", "result", "takes"},
    "sleep": {"sleep"},
    "repeat": {"repeat", "steps"},
    "raw": {"raw"},
    "until_stopped": {"until_stopped", "steps"},
    "wait_for": {"wait_for", "where", "timeout"},
}


def step_kind(step: dict[str, Any]) -> str:
    for kind in _STEP_KEYS:
        if kind in step:
            return kind
    raise KeyError("no step kind")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 and math.isfinite(value)


def _check_step(step: Any, where: str) -> None:
    if not isinstance(step, dict):
        raise ScenarioError(f"{where}: a step must be a JSON object")
    kinds = [k for k in _STEP_KEYS if k in step]
    if len(kinds) != 1:
        raise ScenarioError(f"{where}: a step needs exactly one of {', '.join(_STEP_KEYS)}")
    kind = kinds[0]
    extra = set(step) - _STEP_KEYS[kind] - {"note"}
    if extra:
        raise ScenarioError(f"{where}: unknown key(s) {', '.join(sorted(extra))} in a {kind} step")
    check = _STEP_CHECKS.get(kind)
    if check is not None:
        check(step, where)
    for i, child in enumerate(step.get("steps") or []):
        _check_step(child, f"{where} (steps[{i}])")
    if step.get("steps"):
        _check_list(step["steps"], where)


def _check_emit(step: dict[str, Any], where: str) -> None:
    if not isinstance(step["emit"], dict):
        raise ScenarioError(f"{where}: emit takes an event object")


def _check_call(step: dict[str, Any], where: str) -> None:
    call = step["call"]
    if not (isinstance(call, dict) and isinstance(call.get("tool"), str) and isinstance(call.get("args"), dict)):
        raise ScenarioError(f'{where}: call takes {{"tool": NAME, "args": {{...}}}}')
    result = step.get("result")
    if result is not None:
        if not isinstance(result, dict) or not isinstance(result.get("output"), str):
            raise ScenarioError(f'{where}: result takes {{"output": TEXT, ...}}')
        chars = result.get("output_chars")
        if chars is not None and (not isinstance(chars, int) or isinstance(chars, bool) or chars < 0
                                  or (chars and not result["output"])):
            raise ScenarioError(f"{where}: output_chars must be a whole number >= 0 (with a non-empty output)")
    if "takes" in step and not _number(step["takes"]):
        raise ScenarioError(f"{where}: takes must be a number of seconds >= 0")


def _check_sleep(step: dict[str, Any], where: str) -> None:
    if not _number(step["sleep"]):
        raise ScenarioError(f"{where}: sleep must be a number of seconds >= 0")


def _check_repeat(step: dict[str, Any], where: str) -> None:
    count = step["repeat"]
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ScenarioError(f"{where}: repeat must be a whole number >= 0")
    if not isinstance(step.get("steps"), list) or not step["steps"]:
        raise ScenarioError(f"{where}: repeat needs a non-empty steps list")


def _check_raw(step: dict[str, Any], where: str) -> None:
    if not isinstance(step["raw"], str):
        raise ScenarioError(f"{where}: raw takes a string")


def _check_until_stopped(step: dict[str, Any], where: str) -> None:
    if step["until_stopped"] is not True:
        raise ScenarioError(f"{where}: until_stopped must be true")
    if "steps" in step and (not isinstance(step["steps"], list) or not step["steps"]):
        raise ScenarioError(f"{where}: until_stopped steps must be a non-empty list")


def _check_wait_for(step: dict[str, Any], where: str) -> None:
    if not isinstance(step["wait_for"], str) or not step["wait_for"]:
        raise ScenarioError(f"{where}: wait_for takes a line type such as inject")
    if "where" in step and not isinstance(step["where"], dict):
        raise ScenarioError(f"{where}: where takes an object of field values")
    if "timeout" in step and not _number(step["timeout"]):
        raise ScenarioError(f"{where}: timeout must be a number of seconds >= 0")


_STEP_CHECKS: dict[str, Callable[[dict[str, Any], str], None]] = {
    "emit": _check_emit, "call": _check_call, "sleep": _check_sleep, "repeat": _check_repeat, "raw": _check_raw,
    "until_stopped": _check_until_stopped, "wait_for": _check_wait_for}


def _check_list(steps: list[dict[str, Any]], where: str) -> None:
    for i, step in enumerate(steps):
        if "until_stopped" in step:
            if i != len(steps) - 1:
                raise ScenarioError(f"{where}: until_stopped must be the last step of its list")
            if "steps" not in step and i == 0:
                raise ScenarioError(f"{where}: until_stopped without steps repeats the previous step; there is none")


def _substitute(value: Any, n: int, i: int) -> Any:
    if isinstance(value, str):
        return value.replace("{n}", str(n)).replace("{i}", str(i))
    if isinstance(value, dict):
        return {k: _substitute(v, n, i) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, n, i) for v in value]
    return value


# ---- stdin -----------------------------------------------------------------

def _is_stop(raw: bytes) -> bool:
    try:
        obj = json.loads(raw)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("type") == "stop"


class Inbox:
    """Lines from the supervisor, read by a thread with os.read (never a locked buffered reader)."""

    def __init__(self, fd: int | None, log: Callable[[str], None]) -> None:
        self.log = log
        self.queue: queue.Queue[bytes | None] = queue.Queue()
        self.closed = fd is None
        self.stop_seen = False
        self.seen: list[dict[str, Any]] = []  # non-reply lines, for wait_for
        self.mark = 0
        if fd is not None:
            threading.Thread(target=self._read, args=(fd,), name="scripted-stdin", daemon=True).start()

    def _read(self, fd: int) -> None:
        pending = b""
        try:
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if b'"stop"' in line and _is_stop(line):
                        self.stop_seen = True  # before the main thread parses it: the SIGTERM handler looks
                    self.queue.put(line)
        except OSError:
            pass
        if pending:
            self.queue.put(pending)
        self.queue.put(None)

    def next(self, timeout: float | None) -> dict[str, Any] | None:
        """The next well-formed line within `timeout` (None: forever), or None.

        Raises _Stopped on `stop`. After EOF `self.closed` is set and None is returned.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.closed:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                raw = self.queue.get(timeout=remaining) if remaining != 0.0 else self.queue.get_nowait()
            except queue.Empty:
                return None
            if raw is None:
                self.closed = True
                self.log("stdin closed")
                return None
            message = self._parse(raw)
            if message is not None:
                return message
        return None

    def _parse(self, raw: bytes) -> dict[str, Any] | None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        self.log("<- " + text)
        if not text.strip():
            return None
        try:
            obj = json.loads(text)
        except ValueError as exc:
            self.log(f"ignoring a malformed line (not JSON: {exc})")
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            self.log("ignoring a malformed line (not an object with a string 'type')")
            return None
        kind = obj["type"]
        if kind == "stop":
            raise _Stopped(f"{obj.get('reason')}: {obj.get('message')}")
        if kind == "inject":
            self.log(f"inject ({obj.get('kind')}, {obj.get('rule')}): {str(obj.get('text'))[:200]}")
        if kind not in ("verdict", "spill", "welcome"):
            self.seen.append(obj)
            if len(self.seen) > _SEEN_KEPT:
                drop = len(self.seen) - _SEEN_KEPT
                del self.seen[:drop]
                self.mark = max(0, self.mark - drop)
        return obj

    def stop_pending(self) -> bool:
        """A `stop` line was read from stdin (handled or not yet), for the SIGTERM handler."""
        return self.stop_seen

    def drain(self) -> None:
        """Handle every line already queued (a `stop` among them raises)."""
        while not self.closed and not self.queue.empty():
            self.next(0.0)

    def wait_reply(self, accept: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """Wait, without a timeout, for a line that `accept`s; others are logged and skipped."""
        while True:
            message = self.next(None)
            if message is None:
                raise _Closed(f"stdin closed while waiting for {what}")
            if accept(message):
                return message
            if message["type"] not in ("inject",):
                self.log(f"not what I am waiting for ({what}); still waiting")

    def sleep(self, seconds: float) -> None:
        """Sleep, still reading stdin (a `stop` cuts it short)."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if self.closed:
                time.sleep(remaining)
                return
            self.next(remaining)

    def wait_seen(self, kind: str, where: dict[str, Any], timeout: float | None) -> dict[str, Any] | None:
        """A non-reply line of this type that arrived since the previous wait_seen (or arrives now)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            for index in range(self.mark, len(self.seen)):
                obj = self.seen[index]
                if obj["type"] == kind and all(obj.get(k) == v for k, v in where.items()):
                    self.mark = index + 1
                    return obj
            self.mark = len(self.seen)
            if self.closed:
                if timeout is None:
                    raise _Closed(f"stdin closed while waiting for a {kind} line")
                return None
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            self.next(remaining)


# ---- the agent ---------------------------------------------------------------

# the pauses of a paced agent, as multiples of --pace (mean 1): a fixed rhythm, so a run is the same every time
PACE_RHYTHM = (1.0, 0.5, 1.5, 0.8, 1.2)


class ScriptedAgent:
    """Runs one scenario against a supervisor on stdin/stdout."""

    def __init__(self, scenario: Scenario, *, speed: float = 1.0, pace: float = 0.0, handshake: bool | None = None,
                 stdin_fd: int | None = 0, stdout: BinaryIO | None = None, stderr: TextIO | None = None) -> None:
        if not speed > 0:
            raise ValueError("speed must be > 0")
        self.scenario = scenario
        self.speed = speed
        self.pace = pace
        self.handshake = scenario.handshake if handshake is None else handshake
        self.out = stdout if stdout is not None else sys.stdout.buffer
        self.err = stderr if stderr is not None else sys.stderr
        self.inbox = Inbox(stdin_fd, self.log)
        self.calls = 0
        self.lines = 0  # paced lines written so far
        self.spill_threshold = 0

    def log(self, text: str) -> None:
        try:
            self.err.write(PREFIX + text + "\n")
            self.err.flush()
        except (OSError, ValueError):
            pass

    def write(self, obj: dict[str, Any] | str) -> None:
        line = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False, allow_nan=False,
                                                           separators=(",", ":"))
        try:
            self.out.write(line.encode("utf-8", "surrogatepass") + b"\n")
            self.out.flush()
        except (OSError, ValueError) as exc:
            raise _Closed(f"stdout closed ({exc.__class__.__name__})") from None

    def emit(self, event: dict[str, Any]) -> None:
        if "ts" not in event:
            event = {**event, "ts": time.time()}
        self.write(event)

    def run(self) -> int:
        try:
            self._run()
        except _Stopped as stop:
            self.log(f"stopped ({stop}); exiting")
            return EXIT_OK
        except _Closed as closed:
            self.log(f"{closed}; exiting with {EXIT_CLOSED}")
            return EXIT_CLOSED
        self.log("script finished")
        return EXIT_OK

    def _run(self) -> None:
        s = self.scenario
        self.log(f"scenario {s.name} ({s.source}), handshake {'on' if self.handshake else 'off'}, speed {self.speed:g}")
        self.emit({"type": "hello", "name": f"scripted-{s.name}", "protocol": 1, "handshake": self.handshake})
        if self.handshake:
            welcome = self.inbox.wait_reply(lambda m: m["type"] == "welcome", "the welcome")
            threshold = welcome.get("spill_threshold")
            if isinstance(threshold, int) and not isinstance(threshold, bool) and threshold > 0:
                self.spill_threshold = threshold
        self._steps(list(s.steps), 1)

    def _steps(self, steps: list[dict[str, Any]], i: int) -> bool:
        """Run a list of steps; True when any step waited (for time or for the supervisor)."""
        waited = False
        for index, step in enumerate(steps):
            self.inbox.drain()
            if "note" in step:
                self.log("-- " + str(step["note"]))
            kind = step_kind(step)
            if kind == "until_stopped":
                group = step.get("steps") or [steps[index - 1]]
                self._until_stopped(group)
            else:
                waited = self._step(kind, step, i) or waited
        return waited

    def _step(self, kind: str, step: dict[str, Any], i: int) -> bool:
        if self.pace and kind in ("emit", "raw", "call"):
            self._sleep_real(self.pace * PACE_RHYTHM[self.lines % len(PACE_RHYTHM)])
            self.lines += 1
        if kind == "emit":
            self.emit(_substitute(step["emit"], self.calls, i))
            return False
        if kind == "raw":
            self.write(step["raw"])
            return False
        if kind == "sleep":
            self._sleep(step["sleep"])
            return bool(step["sleep"])
        if kind == "call":
            self._call(step, i)
            return self.handshake or bool(step.get("takes"))
        if kind == "repeat":
            waited = False
            for j in range(1, step["repeat"] + 1):
                waited = self._steps(step["steps"], j) or waited
            return waited
        if kind == "wait_for":
            what = step["wait_for"]
            found = self.inbox.wait_seen(what, step.get("where") or {}, step.get("timeout"))
            self.log(f"waited for {what}: " + ("got it" if found else "gave up, going on"))
            return True
        raise AssertionError(kind)

    def _until_stopped(self, group: list[dict[str, Any]]) -> None:
        self.log("repeating until stopped")
        i = 0
        while True:
            i += 1
            if self.inbox.closed:
                raise _Closed("stdin closed while repeating until stopped")
            if not self._steps(group, i):
                self._sleep_real(_IDLE_FLOOR)

    def _sleep(self, seconds: float) -> None:
        self._sleep_real(seconds / self.speed)

    def _sleep_real(self, seconds: float) -> None:
        if seconds > 0:
            self.inbox.sleep(seconds)

    def _call(self, step: dict[str, Any], i: int) -> None:
        self.calls += 1
        n = self.calls
        call_id = f"c{n}"
        call = _substitute(step["call"], n, i)
        tool = call["tool"]
        self.emit({"type": "tool_call", **call, "call_id": call_id})
        if self.handshake:
            verdict = self.inbox.wait_reply(
                lambda m: m["type"] == "verdict" and m.get("call_id") in (call_id, None), f"the verdict on {call_id}")
            if verdict.get("action") == "block":
                self.log(f"{call_id} ({tool}) blocked: {verdict.get('message')}")
                return
        if step.get("takes"):
            self._sleep(step["takes"])
        result = step.get("result")
        if result is None:
            return
        result = _substitute(result, n, i)
        chars = result.pop("output_chars", None)
        if chars is not None:
            text = result["output"]
            result["output"] = (text * (chars // len(text) + 1))[:chars] if chars else ""
        self.emit({"type": "tool_result", "tool": tool, "call_id": call_id, **result})
        if self.handshake and self.spill_threshold and len(result["output"]) > self.spill_threshold:
            spill = self.inbox.wait_reply(
                lambda m: m["type"] == "spill" and m.get("call_id") in (call_id, None), f"the spill of {call_id}")
            self.log(f"{call_id} output spilled to {spill.get('path')} ({spill.get('size')} characters)")


# ---- command line ------------------------------------------------------------

def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be > 0 (inf skips every sleep)")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loopwarden.sessions.scripted",
        description="A deterministic agent that plays a scenario over the native protocol.",
        epilog="Scenario format: see the module docstring (python -m pydoc loopwarden.sessions.scripted).")
    parser.add_argument("scenario", nargs="?", help="a bundled scenario name or a scenario file")
    parser.add_argument("--speed", type=_speed, default=1.0, help="divide every sleep by this (default 1)")
    parser.add_argument("--pace", type=float, default=0.0, metavar="SECONDS",
                        help="wait this long on average before each line the agent writes (for a demo; default 0)")
    parser.add_argument("--no-handshake", action="store_true", help="observed only, whatever the header says")
    parser.add_argument("--list", action="store_true", help="list the bundled scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name in bundled():
            s = load_scenario(name)
            config = " ".join(f"--set {c}" for c in s.config)
            print(f"{name:<14} {s.description}" + (f"  [{config}]" if config else ""))
        return EXIT_OK
    if not args.scenario:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: a SCENARIO is needed (one of {', '.join(bundled())}, or a file)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(f"{PREFIX}error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    agent = ScriptedAgent(scenario, speed=args.speed, pace=max(0.0, args.pace),
                          handshake=False if args.no_handshake else None)

    def on_sigterm(signum: int, frame: Any) -> None:
        # The supervisor writes `stop` just before SIGTERM: give the reader thread a moment to see it.
        # stdout lines are flushed as they are written; nothing else needs saving.
        deadline = time.monotonic() + 0.2
        while not agent.inbox.stop_pending() and time.monotonic() < deadline:
            time.sleep(0.005)
        code = EXIT_OK if agent.inbox.stop_pending() else EXIT_SIGTERM
        os.write(2, f"{PREFIX}SIGTERM; exiting with {code}\n".encode())
        os._exit(code)

    signal.signal(signal.SIGTERM, on_sigterm)
    code = agent.run()
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass
    return code


def _exit(code: int) -> None:
    """Exit without a second flush of a broken stdout at interpreter shutdown."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(code)


if __name__ == "__main__":
    _exit(main())
