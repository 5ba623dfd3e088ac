"""The built-in coding agent: a small tool loop on the `anthropic` SDK that speaks native protocol v1.

    loopwarden run --adapter native -- loopwarden-agent "fix the failing test"

It sends `hello` with the handshake, so every tool call waits for loopwarden's verdict before it
runs; a blocked call is not run, and the verdict's message goes back to the model as the tool's
error result. Text that loopwarden injects (nudges, guidance, unblock authority, escalations)
is added to the next request as a user turn. An `escalate` injection moves the agent up its model
ladder (haiku, then sonnet, then opus); past the top it asks for a human with a
`gate_request`. A `stop` line ends it. See docs/agent.md.

Tools: `bash` (a shell command, with a timeout and bounded output), `read_file`, `write_file` and
`edit_file` (replace one exact, unique string). Every model turn that used tools is reported as an
`iteration` (failed when a call failed or was blocked), each response as `usage`, and its text
as `assistant_message`. `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL` are read by the SDK.

Exit codes: 0 done (or stopped by loopwarden); 1 an API error or the iteration limit; 2 a bad
command line or no API key; 3 stdin or stdout closed while the supervisor was needed.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import anthropic

PREFIX = "loopwarden-agent: "
DEFAULT_MODELS = ("claude-haiku-5-5", "claude-sonnet-5-5", "claude-opus-5-5")
MODELS_ENV = "LOOPWARDEN_AGENT_MODELS"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CLOSED = 0, 1, 2, 3
EXIT_SIGTERM = 128 + signal.SIGTERM
CAPTURE_BYTES = 512 * 1024  # command output kept per call (the supervisor spills what is over its threshold)
MODEL_CHARS = 100_000  # longest tool result handed to the model
READ_CHARS = 100_000

SYSTEM = """You are loopwarden-agent, a small coding agent working in {cwd}.
Tools: bash (run a shell command), read_file, write_file, and edit_file (replace one exact,
unique string). Work in small, verified steps: look before you change a file, and run the tests
after a change. A supervisor watches every tool call. When a call is blocked or the supervisor
sends you a message, follow it and change your approach; do not retry the same thing.
When the task is done, or you cannot make progress, stop calling tools and reply with a short
summary of what you did and what is left."""


def _schema(required: dict[str, str], optional: dict[str, str] | None = None) -> dict[str, Any]:
    props = {k: {"type": "string", "description": d} for k, d in {**required, **(optional or {})}.items()}
    return {"type": "object", "properties": props, "required": list(required)}


TOOLS: list[dict[str, Any]] = [
    {"name": "bash", "description": "Run a shell command in the working directory; returns its output.",
     "input_schema": _schema({"command": "the command line"})},
    {"name": "read_file", "description": "Read a text file.", "input_schema": _schema({"path": "file path"})},
    {"name": "write_file", "description": "Create or overwrite a file with the given content.",
     "input_schema": _schema({"path": "file path", "content": "the whole new content"})},
    {"name": "edit_file", "description": "Replace old_string, which must occur exactly once, with new_string.",
     "input_schema": _schema({"path": "file path", "old_string": "exact text to replace",
                              "new_string": "replacement text"})},
]


class Stopped(Exception):
    """loopwarden sent `stop`."""


class Closed(Exception):
    """stdin or stdout closed while the supervisor was needed."""


def log(text: str) -> None:
    try:
        sys.stderr.write(PREFIX + text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters omitted ...]\n{text[-half:]}"


# ---- tools -----------------------------------------------------------------------

class Outcome(NamedTuple):
    output: str
    failed: bool = False
    exit_code: int | None = None
    modified: str | None = None  # the path a write or edit changed


_children: list[subprocess.Popen[bytes]] = []  # the running command, killed on SIGTERM


def kill_children() -> None:
    for proc in _children:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_command(command: str, cwd: Path, timeout: float) -> Outcome:
    """Run `command` in its own process group; keep the first CAPTURE_BYTES of its output."""
    shell = shutil.which("bash") or "/bin/sh"
    proc = subprocess.Popen([shell, "-c", command], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    _children.append(proc)
    kept: list[bytes] = []
    sizes = [0, 0]  # kept, total

    def pump() -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        try:
            while chunk := os.read(fd, 65536):
                room = CAPTURE_BYTES - sizes[0]
                if room > 0:
                    kept.append(chunk[:room])
                    sizes[0] += min(room, len(chunk))
                sizes[1] += len(chunk)
        except OSError:
            pass
        finally:
            proc.stdout.close()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    note = ""
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_children()
        code = proc.wait()
        note = f"\n[timed out after {timeout:g}s; the command was killed]"
    finally:
        _children.remove(proc)
    reader.join(2.0)
    if reader.is_alive():
        note += "\n[a background process still holds the output; not waiting for it]"
    text = b"".join(kept).decode("utf-8", "replace")
    if sizes[1] > sizes[0]:
        text += f"\n[... {sizes[1] - sizes[0]:,} more bytes of output not kept]"
    return Outcome(text + note, failed=bool(note) or code != 0, exit_code=code)


def _arg(args: dict[str, Any], name: str, tool: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise TypeError(f"{tool} needs a string '{name}'")
    return value


def run_tool(name: str, args: dict[str, Any], cwd: Path, timeout: float) -> Outcome:
    """Run one tool call; a bad call or an OS error is a failed outcome, never an exception."""
    try:
        if name == "bash":
            return run_command(_arg(args, "command", name), cwd, timeout)
        if name not in ("read_file", "write_file", "edit_file"):
            return Outcome(f"unknown tool {name!r}; use one of {', '.join(t['name'] for t in TOOLS)}", True)
        shown = _arg(args, "path", name)
        path = cwd / shown
        if name == "read_file":
            text = path.read_text(encoding="utf-8", errors="replace")
            if len(text) > READ_CHARS:
                text = text[:READ_CHARS] + f"\n[... {len(text) - READ_CHARS:,} more characters; use bash to see them]"
            return Outcome(text or "(empty file)")
        if name == "write_file":
            content = _arg(args, "content", name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            return Outcome(f"wrote {len(content):,} characters to {shown}", modified=shown)
        old, new = _arg(args, "old_string", name), _arg(args, "new_string", name)
        text = path.read_text(encoding="utf-8")
        count = text.count(old) if old else 0
        if count != 1:
            where = "was not found" if not count else f"occurs {count} times"
            return Outcome(f"old_string {where} in {shown}; it must match exactly once", True)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        return Outcome(f"edited {shown}", modified=shown)
    except (OSError, TypeError, ValueError) as exc:
        return Outcome(f"{type(exc).__name__}: {exc}", True)


# ---- the supervisor's side ----------------------------------------------------------

class Inbox:
    """Lines from loopwarden on stdin, read by a thread; `stop` raises Stopped where it is taken."""

    def __init__(self, fd: int | None = 0) -> None:
        self.queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.closed = fd is None
        self.stop_seen = False
        if fd is not None:
            threading.Thread(target=self._read, args=(fd,), name="agent-stdin", daemon=True).start()

    def _read(self, fd: int) -> None:
        pending = b""
        try:
            while chunk := os.read(fd, 65536):
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    self._put(raw)
        except OSError:
            pass
        self._put(pending)
        self.queue.put(None)

    def _put(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            obj = json.loads(raw)
        except ValueError:
            obj = None
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            log(f"ignoring a malformed line from the supervisor: {raw[:120]!r}")
            return
        if obj["type"] == "stop":
            self.stop_seen = True  # before the main thread takes it: the SIGTERM handler looks
        self.queue.put(obj)

    def next(self, timeout: float | None) -> dict[str, Any] | None:
        """The next line (None: none within `timeout`, or stdin closed). Raises Stopped on `stop`."""
        if self.closed:
            return None
        try:
            obj = self.queue.get(timeout=timeout) if timeout != 0 else self.queue.get_nowait()
        except queue.Empty:
            return None
        if obj is None:
            self.closed = True
            return None
        if obj["type"] == "stop":
            raise Stopped(obj.get("message") or obj.get("reason") or "stop")
        return obj


# ---- the agent ----------------------------------------------------------------------

class Answer(NamedTuple):
    """What one tool_use came to: the tool_result block for the model, the failure text, a changed path."""

    block: dict[str, Any]
    failure: str | None = None
    modified: str | None = None


class Agent:
    """One task, one conversation, one model ladder."""

    def __init__(self, client: anthropic.Anthropic, task: str, *, models: list[str], model_index: int = 0,
                 max_iterations: int = 10, max_tokens: int = 8192, stream: bool = True, handshake: bool = True,
                 cwd: Path | None = None, timeout: float = 120.0, inbox: Inbox | None = None) -> None:
        self.client = client
        self.task = task
        self.models = models
        self.index = model_index
        self.max_iterations = max_iterations
        self.max_tokens = max_tokens
        self.stream = stream
        self.handshake = handshake
        self.cwd = cwd or Path.cwd()
        self.timeout = timeout
        self.inbox = inbox or Inbox(None)
        self.pending: list[str] = []  # supervisor text for the next user turn
        self.spill_threshold = 0

    @property
    def model(self) -> str:
        return self.models[self.index]

    def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps({**event, "ts": time.time()}, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        try:
            sys.stdout.buffer.write(line.encode("utf-8", "surrogatepass") + b"\n")
            sys.stdout.buffer.flush()
        except (OSError, ValueError) as exc:
            raise Closed(f"stdout closed ({type(exc).__name__})") from None

    # -- stdin
    def take(self, msg: dict[str, Any]) -> None:
        """Handle a line that is not the reply being waited for."""
        if msg["type"] != "inject":
            return
        kind, text = msg.get("kind") or "nudge", msg.get("text")
        log(f"<- {kind} ({msg.get('rule')})")
        if isinstance(text, str) and text.strip():
            who = "an operator, through loopwarden" if kind == "operator" else "the supervisor (loopwarden)"
            self.pending.append(f"Message from {who}: {text}")
        if kind == "escalate":
            self.escalate(msg.get("model"))

    def drain(self) -> None:
        while (msg := self.inbox.next(0)) is not None:
            self.take(msg)

    def wait_reply(self, accept: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """Wait without a timeout (a human gate may hold the reply) for a line that `accept`s."""
        while True:
            msg = self.inbox.next(None)
            if msg is None:
                raise Closed(f"stdin closed while waiting for {what}")
            if accept(msg):
                return msg
            self.take(msg)

    def escalate(self, target: Any) -> None:
        """Move up the ladder: to the named tier if it is above this one, else one up; past the top, a human."""
        if target == "human":
            return  # loopwarden opened the gate itself; the next verdict waits for the human
        named = [i for i, m in enumerate(self.models) if isinstance(target, str) and target
                 and (m == target or target.lower() in m.lower())]
        nxt = max([self.index + 1, *named])
        if nxt < len(self.models):
            log(f"escalating from {self.model} to {self.models[nxt]}")
            self.index = nxt
            return
        # one fixed reason, so loopwarden keeps a single gate open however many escalations follow
        self.emit({"type": "gate_request",
                   "reason": f"model escalation past {self.model}, the last model of the ladder: a human is needed"})

    # -- the loop
    def run(self) -> int:
        self.emit({"type": "hello", "name": "loopwarden-agent", "protocol": 1, "handshake": self.handshake})
        if self.handshake:
            welcome = self.wait_reply(lambda m: m["type"] == "welcome", "the welcome")
            threshold = welcome.get("spill_threshold")
            if isinstance(threshold, int) and not isinstance(threshold, bool) and threshold > 0:
                self.spill_threshold = threshold
        messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": self.task}]}]
        turns = 0
        while True:
            self.drain()
            if self.pending and messages[-1]["role"] == "user":
                messages[-1]["content"] += [{"type": "text", "text": text} for text in self.pending]
                self.pending = []
            response = self.ask(messages)
            self.report(response)
            messages.append({"role": "assistant", "content": [_block(b) for b in response.content]})
            if response.stop_reason == "pause_turn":
                continue
            uses = [b for b in response.content if b.type == "tool_use"]
            if not uses:
                text = "\n".join(b.text for b in response.content if b.type == "text").strip()
                self.emit({"type": "done", "summary": text[:2000] or f"finished ({response.stop_reason})"})
                return EXIT_OK
            turns += 1
            results = [self.call(use) for use in uses]
            failures = [r.failure for r in results if r.failure]
            iteration: dict[str, Any] = {"type": "iteration", "n": turns, "status": "fail" if failures else "pass",
                                         "files_modified": sorted({r.modified for r in results if r.modified})}
            if failures:
                iteration["error"] = failures[0][:300]
            self.emit(iteration)
            messages.append({"role": "user", "content": [r.block for r in results]})
            if turns >= self.max_iterations:
                message = f"stopped after {turns} iterations (--max-iterations) without finishing"
                self.emit({"type": "error", "message": message, "error_type": "max_iterations"})
                log(message)
                return EXIT_FAILED

    def ask(self, messages: list[dict[str, Any]]) -> Any:
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "tools": TOOLS,
                                  "system": SYSTEM.format(cwd=self.cwd), "messages": messages}
        if self.stream:
            with self.client.messages.stream(**kwargs) as stream:
                return stream.get_final_message()
        return self.client.messages.create(**kwargs)

    def report(self, response: Any) -> None:
        u = response.usage
        read, write = u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0
        line: dict[str, Any] = {"type": "usage", "input_tokens": u.input_tokens + read + write,
                                "output_tokens": u.output_tokens, "model": response.model or self.model}
        if read or write:  # loopwarden prices them apart (docs/cost.md)
            line.update(cache_read_tokens=read, cache_write_tokens=write)
        self.emit(line)
        text = "\n".join(b.text for b in response.content if b.type == "text").strip()
        if text:
            self.emit({"type": "assistant_message", "text": text})

    def call(self, use: Any) -> Answer:
        """One tool_use: announce it, wait for the verdict, then run it (or not)."""
        args = use.input if isinstance(use.input, dict) else {}
        self.emit({"type": "tool_call", "tool": use.name, "args": args, "call_id": use.id})
        if self.handshake:
            verdict = self.wait_reply(lambda m: m["type"] == "verdict" and m.get("call_id") in (use.id, None),
                                      f"the verdict on {use.id}")
            if verdict.get("action") == "block":
                message = verdict.get("message") or "This tool call was blocked by the supervisor."
                log(f"{use.name} call {use.id} blocked")
                return Answer(_result(use.id, message, True), message)
        out = run_tool(use.name, args, self.cwd, self.timeout)
        self.emit({"type": "tool_result", "tool": use.name, "call_id": use.id, "output": out.output,
                   "is_error": out.failed and out.exit_code is None,
                   **({"exit_code": out.exit_code} if out.exit_code is not None else {})})
        text = out.output
        if self.handshake and self.spill_threshold and len(text) > self.spill_threshold:
            spill = self.wait_reply(lambda m: m["type"] == "spill" and m.get("call_id") in (use.id, None),
                                    f"the spill of {use.id}")
            text = str(spill.get("message") or "")
        if out.exit_code:
            text += f"\n[exit code {out.exit_code}]"
        failure = (out.output or "failed") if out.failed else None
        return Answer(_result(use.id, clip(text, MODEL_CHARS), out.failed), failure, out.modified)


def _result(tool_use_id: str, text: str, is_error: bool) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": text or "(no output)", "is_error": is_error}


def _block(block: Any) -> dict[str, Any]:
    """A response block as request content (text and tool_use explicitly; others as the API sent them)."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(mode="json", exclude_none=True)


# ---- command line ------------------------------------------------------------------

def api_error(exc: anthropic.APIError) -> str:
    """One line for an API failure (never the key, never a traceback)."""
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        err = body.get("error")
        err = err if isinstance(err, dict) else {}
        text = f"the API answered {exc.status_code} {err.get('type') or 'error'}: {err.get('message') or exc.message}"
    elif isinstance(exc, anthropic.APIConnectionError):
        text = f"cannot reach the API ({exc.message})"
    else:
        text = f"API error: {exc or type(exc).__name__}"
    return " ".join(text.split())[:500]


def _fail(message: str) -> NoReturn:
    print(f"{PREFIX}{message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopwarden-agent", description="A small coding agent on the Anthropic API, supervised by loopwarden.",
        epilog='Example: loopwarden run --adapter native -- loopwarden-agent "fix the failing test"')
    parser.add_argument("task", nargs="+", help="what to do (the words are joined with spaces)")
    parser.add_argument("--model", help="the model to start with (default: the first of the ladder)")
    parser.add_argument("--models", help=f"the model ladder, cheapest first, comma-separated "
                        f"(default: ${MODELS_ENV} or {','.join(DEFAULT_MODELS)})")
    parser.add_argument("--max-iterations", type=int, default=10, help="model turns with tool calls (default 10)")
    parser.add_argument("--max-tokens", type=int, default=8192, help="max_tokens per request (default 8192)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a shell command may run (default 120)")
    parser.add_argument("--max-retries", type=int, default=2, help="SDK retries of a failed request (default 2)")
    parser.add_argument("-C", "--directory", type=Path, help="work in this directory (default: the current one)")
    parser.add_argument("--no-stream", action="store_true", help="plain requests instead of streaming")
    parser.add_argument("--no-handshake", action="store_true", help="do not wait for verdicts (run unsupervised)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    ladder = args.models or os.environ.get(MODELS_ENV) or ",".join(DEFAULT_MODELS)
    models = [m.strip() for m in ladder.split(",") if m.strip()]
    if not models:
        _fail(f"the model ladder is empty (--models or ${MODELS_ENV})")
    if args.model and args.model not in models:
        models.insert(0, args.model)
    if args.max_iterations < 1 or args.max_tokens < 1 or args.timeout <= 0 or args.max_retries < 0:
        _fail("--max-iterations, --max-tokens and --timeout must be positive, --max-retries >= 0")
    cwd = (args.directory or Path.cwd()).resolve()
    if not cwd.is_dir():
        _fail(f"no such directory: {cwd}")
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        _fail("ANTHROPIC_API_KEY is not set; export it (and ANTHROPIC_BASE_URL for a proxy or a "
                      "local server) and run again")
    client = anthropic.Anthropic(max_retries=args.max_retries)
    inbox = Inbox(0)
    agent = Agent(client, " ".join(args.task), models=models, model_index=models.index(args.model or models[0]),
                  max_iterations=args.max_iterations, max_tokens=args.max_tokens, stream=not args.no_stream,
                  handshake=not args.no_handshake, cwd=cwd, timeout=args.timeout, inbox=inbox)

    def on_sigterm(signum: int, frame: Any) -> None:
        # loopwarden writes `stop` just before SIGTERM: give the reader thread a moment to see it
        deadline = time.monotonic() + 0.2
        while not inbox.stop_seen and time.monotonic() < deadline:
            time.sleep(0.005)
        kill_children()
        os._exit(EXIT_OK if inbox.stop_seen else EXIT_SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        return agent.run()
    except Stopped as stop:
        log(f"stopped by loopwarden: {stop}")
        return EXIT_OK
    except Closed as closed:
        log(f"{closed}; exiting")
        return EXIT_CLOSED
    except anthropic.APIError as exc:
        message = api_error(exc)
        log(message)
        try:
            agent.emit({"type": "error", "message": message, "error_type": type(exc).__name__})
        except Closed:
            pass
        return EXIT_FAILED
    except KeyboardInterrupt:
        kill_children()
        return 130


if __name__ == "__main__":
    sys.exit(main())
