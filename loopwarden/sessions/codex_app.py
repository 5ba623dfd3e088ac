"""Codex CLI launched by loopwarden: `codex app-server`, JSON-RPC over stdio, vetoes by declining approvals.

The CLI runs as `codex app-server [-c key=value ...]` (docs/codex.md). At
start loopwarden sends `initialize`, `initialized` and `thread/start` with `approvalPolicy:
"untrusted"`, so Codex asks before every command; once the thread exists, `turn/start` with the
prompt. Each `item/commandExecution/requestApproval` and `item/fileChange/requestApproval` is the
ToolCall the engine judges, and `verdict_line` answers it `accept` or `decline` (never a decision
that persists, such as `acceptForSession`). A decline carries no reason, so the verdict's message
goes first as a `turn/steer`: the model reads it in the same request that brings the declined
call's output. A gate leaves the approval unanswered. Injections steer the running turn, or start
the next one; an escalation to another model names it on that next `turn/start`. Terminate is a
`turn/interrupt`, then stdin closes and the session's processes are stopped. A turn that ends with
nothing owed either way closes stdin, and the app-server exits.

Every request Codex sends is answered, even one loopwarden cannot read (a decline, or an error), so
Codex never waits forever. `AppServerParser` maps the stream to Events without answering anything;
`loopwarden replay --format codex-app-server` uses it alone.

A rewind (`rewind_line`) is `thread/revert {threadId, beforeTurnId}`: Codex ends the running turn itself,
resolves its open approvals and drops that turn and every later one from the model's history; once it
answers, a `turn/start` retries the dropped turn's own input with loopwarden's guidance after it. Files
the dropped turns changed stay changed (Codex reverts history only).

The agent may outlive the daemon (`keepable`): `memory` is the thread and turn, the requests waiting for an answer
both ways and the ids given out, so a later daemon answers an approval a gate still holds, steers the running turn
and closes stdin when the turn ends, as the earlier one would have.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..supervisor import ladders
from ..supervisor import events as ev
from ..supervisor import protocol
from ..supervisor.verdicts import Action, Verdict
from .base import Adapter, Capability, Handover, line
from .codex import MAP_LIMIT, CodexParser, _int, _str
from . import codex_memory as kept
from .codex_memory import KEPT_ENTRIES, Budget
from .recorded import RecordParser, invalid

ENV_BINARY = "LOOPWARDEN_CODEX"
CLOSE = b""  # a reply that closes the app-server's stdin: it exits
CLIENT_INFO = {"name": "loopwarden", "title": "loopwarden", "version": "1"}
APPROVALS = ("item/commandExecution/requestApproval", "item/fileChange/requestApproval")

# `codex app-server` options kept as given (with their value), and thread settings read from common codex options.
_SERVER_VALUE = frozenset({"-c", "--config", "--enable", "--disable"})
_SERVER_FLAG = frozenset({"--strict-config"})
_THREAD = {"-m": "model", "--model": "model", "-s": "sandbox", "--sandbox": "sandbox", "-C": "cwd", "--cd": "cwd"}

# What Codex's own requests get when loopwarden does not take part: a refusal of the same shape.
_REFUSALS: dict[str, dict[str, Any]] = {
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    "execCommandApproval": {"decision": "denied"},
    "applyPatchApproval": {"decision": "denied"},
    "mcpServer/elicitation/request": {"action": "decline"},
    "item/tool/requestUserInput": {"answers": {}},
}
_ITEM_TYPES = {"commandExecution": "command_execution", "fileChange": "file_change", "mcpToolCall": "mcp_tool_call",
               "webSearch": "web_search", "agentMessage": "agent_message"}
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{1,200}")')
_METHOD = re.compile(rb'"method"\s*:\s*"([^"\\]{1,200})"')


# ---- launching ----------------------------------------------------------------

@dataclass
class CodexArgs:
    """The user's codex words, split: app-server options, thread settings and the prompt."""

    options: list[str] = field(default_factory=list)
    thread: dict[str, str] = field(default_factory=dict)  # model, sandbox, cwd
    prompt: str | None = None


def split_args(words: list[str]) -> CodexArgs:
    """`[codex options] PROMPT`: options (and their values) read as codex reads them, the other words the
    prompt; raises ValueError (one line) on an option `codex app-server` would refuse."""
    out = CodexArgs()
    prompt: list[str] = []
    i = 0
    while i < len(words):
        arg = words[i]
        i += 1
        if arg == "--":
            prompt.extend(words[i:])
            break
        if not arg.startswith("-") or arg == "-":
            prompt.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name in _SERVER_FLAG:
            out.options.append(arg)
            continue
        if name not in _SERVER_VALUE and name not in _THREAD:
            raise ValueError(f"codex app-server does not take {arg!r}; give -c key=value, --enable/--disable "
                             "FEATURE, -m MODEL, -s SANDBOX or -C DIR, then the prompt last")
        if not eq:
            if i >= len(words):
                raise ValueError(f"codex option {arg} needs a value")
            value = words[i]
            i += 1
        if name in _THREAD:
            out.thread[_THREAD[name]] = value
        else:
            out.options += [name, value]
    out.prompt = " ".join(prompt) if prompt else None
    return out


def bundled_binary() -> str | None:
    """The CLI of the `openai-codex-cli-bin` wheel (its layout kept: bin/codex beside codex-resources/)."""
    try:
        import codex_cli_bin  # type: ignore[import-not-found,import-untyped,unused-ignore]

        path = str(codex_cli_bin.bundled_codex_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel for another platform
        return None
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def find_binary(env: dict[str, str] | None = None) -> str | None:
    """$LOOPWARDEN_CODEX, else `codex` on PATH, else the one bundled with openai-codex-cli-bin."""
    env = dict(os.environ) if env is None else env
    chosen = env.get(ENV_BINARY)
    if chosen:
        return chosen
    return shutil.which("codex", path=env.get("PATH")) or bundled_binary()


def is_codex(arg: str) -> bool:
    """Whether a command's first word names the codex binary rather than being an argument."""
    if os.path.basename(arg) == "codex":
        return True
    return os.sep in arg and os.path.isfile(arg) and os.access(arg, os.X_OK)


def _options(args: list[str]) -> list[str]:
    """The codex words after the binary, without `app-server` when the user typed it (it is added anyway)."""
    return args[1:] if args[:1] == ["app-server"] else args


def launch_command(words: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The session command for `codex`: the binary, then the user's codex options and the prompt."""
    words = list(words)
    if len(words) > 1 and is_codex(words[0]):
        binary, args = words[0], words[1:]
    else:
        found = find_binary(env)
        if not found:
            raise ValueError(f"cannot find Codex: no `codex` on PATH; install it (pip install openai-codex-cli-bin) "
                             f"or set {ENV_BINARY}")
        binary, args = found, words
    if split_args(_options(args)).prompt is None:
        raise ValueError('no prompt for Codex: give it as the last argument, e.g. -- -m gpt-5.5 "fix the tests"')
    return [binary, *args]


# ---- reading ----------------------------------------------------------------------

def _exec_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """An app-server item in the shape of a `codex exec --json` item, for CodexParser; None if not mapped."""
    kind = _ITEM_TYPES.get(item.get("type"))  # type: ignore[arg-type]
    if kind is None:
        return None
    out = {**item, "type": kind}
    if "aggregatedOutput" in item:
        out["aggregated_output"] = item["aggregatedOutput"]
    if "exitCode" in item:
        out["exit_code"] = item["exitCode"]
    if kind == "file_change" and isinstance(item.get("changes"), list):
        out["changes"] = [_change(c) for c in item["changes"]]
    return out


def _change(change: Any) -> Any:
    """A fileChange entry with its kind as a word (`add`, `update`, `delete`)."""
    if isinstance(change, dict) and isinstance(change.get("kind"), dict):
        moved = change["kind"].get("move_path")  # kept: the diff shows the file under its new name
        return {**change, "kind": change["kind"].get("type"), **({"move_path": moved} if moved else {})}
    return change


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        info = error.get("codexErrorInfo")
        text = str(message) if message else "error"
        if isinstance(info, str) and info not in text:
            text += f" ({info})"
        elif isinstance(info, dict) and info:
            text += f" ({next(iter(info))})"
        return text
    return str(error) if error else "error"


class AppServerParser(RecordParser):
    """Turns one `codex app-server` stdout stream into Events; keep one instance per stream.

    An approval request is the ToolCall; an item never asked about (a command Codex ran without
    asking) gets its ToolCall just before its result. A declined item has no result, as a vetoed
    call has none in the native protocol.
    """

    def __init__(self) -> None:
        self.items = CodexParser()  # the `codex exec --json` item mapping, reused
        self._calls: dict[str, ev.ToolCall] = {}  # item id -> call seen at item/started, not yet emitted
        self._judged: dict[str, None] = {}  # item ids whose ToolCall was emitted at the approval
        self.prompted = False
        self.turns = 0
        self._reported = False  # an `error` notification of this turn was already an Error event
        self.model: str | None = None  # the thread's, from thread/start's answer or the turn that named one
        self.quota: dict[str, Any] | None = None  # account/rateLimits/updated, merged (quota_of)

    def feed(self, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        method = obj.get("method")
        params = obj.get("params")
        params = params if isinstance(params, dict) else {}
        if not isinstance(method, str):  # a response to one of the client's requests
            result = obj.get("result")
            if isinstance(result, dict) and isinstance(result.get("thread"), dict):
                self.opened(result)
            return []
        if "id" in obj:
            return self.request(method, params, seq)
        return self.notification(method, params, obj, seq)

    def request(self, method: str, params: dict[str, Any], seq: int) -> list[ev.Event]:
        """An approval request to its ToolCall; other requests are no events."""
        if method not in APPROVALS:
            return []
        item_id = _str(params.get("itemId"))
        seen = self._calls.pop(item_id, None) if item_id else None
        if method == APPROVALS[0]:
            tool, args = "shell", {"command": params.get("command")}
        else:
            tool = "apply_patch"
            args = dict(seen.args) if seen else {"changes": None}
            if _str(params.get("reason")):
                args["reason"] = params["reason"]
        if item_id:
            _remember(self._judged, item_id)
        return [ev.ToolCall(seq=seq, tool=tool, args=args, call_id=item_id)]

    def notification(self, method: str, params: dict[str, Any], obj: dict[str, Any], seq: int) -> list[ev.Event]:
        if method in ("item/started", "item/completed"):
            item = params.get("item")
            if not isinstance(item, dict):
                return [invalid(obj, seq, f"{method}: 'item' must be an object")]
            return self._item(item, seq, done=method == "item/completed")
        if method == "thread/tokenUsage/updated":
            usage = params.get("tokenUsage")
            last = usage.get("last") if isinstance(usage, dict) else None
            if not isinstance(last, dict):
                return []
            # inputTokens already include cachedInputTokens (a subset), as in `codex exec --json`
            return [ev.Usage(seq=seq, input_tokens=_int(last.get("inputTokens")) or 0,
                             output_tokens=_int(last.get("outputTokens")) or 0, model=self.model,
                             cache_read_tokens=_int(last.get("cachedInputTokens")),
                             cache_write_tokens=_int(last.get("cacheWriteInputTokens")))]
        if method == "account/rateLimits/updated":
            self.quota = quota_of(params.get("rateLimits"), self.quota)
            return []
        if method == "turn/completed":
            turn = params.get("turn")
            turn = turn if isinstance(turn, dict) else {}
            status = turn.get("status")
            self.turns += 1
            reported, self._reported = self._reported, False
            if status == "completed":
                return [ev.Iteration(seq=seq, n=self.turns, status="pass")]
            message = _error_text(turn.get("error")) if turn.get("error") else f"turn {status or 'ended'}"
            out: list[ev.Event] = []
            if status == "failed" and not reported:  # the error that failed it is usually reported already
                out.append(ev.Error(seq=seq, message=f"codex: the turn failed: {message}", error_type="turn_failed"))
            return [*out, ev.Iteration(seq=seq, n=self.turns, status="fail", error=message)]
        if method == "error":
            if params.get("willRetry") is True:
                return []  # Codex retries it itself
            self._reported = True
            return [ev.Error(seq=seq, message=f"codex: {_error_text(params.get('error'))}", error_type="codex")]
        return []

    def opened(self, result: dict[str, Any]) -> None:
        """thread/start's or thread/resume's answer: the model the thread runs."""
        model = result.get("model")
        if isinstance(model, str) and 0 < len(model) <= 200:
            self.model = model

    def _item(self, item: dict[str, Any], seq: int, done: bool) -> list[ev.Event]:
        if item.get("type") == "userMessage":
            if not done or self.prompted:
                return []  # later user messages are loopwarden's own steering
            self.prompted = True
            content = item.get("content")
            blocks = content if isinstance(content, list) else []
            texts = [str(c.get("text", "")) for c in blocks if isinstance(c, dict)]
            return [ev.UserMessage(seq=seq, text="\n".join(texts))]
        mapped = _exec_item(item)
        if mapped is None:
            return []
        item_id = _str(item.get("id"))
        if done and item.get("status") == "declined":
            if item_id:
                self._calls.pop(item_id, None)
            return []  # it never ran
        kind = "item.completed" if done else "item.started"
        out: list[ev.Event] = []
        for event in self.items.record(kind, {"item": mapped}, seq):
            if type(event) is ev.ToolCall and event.call_id:
                if event.call_id not in self._judged:
                    _remember(self._calls, event.call_id, event)  # judged at its approval, if one comes
                continue
            if type(event) is ev.ToolResult and event.call_id:
                call = self._calls.pop(event.call_id, None)
                if event.call_id in self._judged:
                    self._judged.pop(event.call_id, None)
                elif call is not None:
                    out.append(ev.ToolCall(seq=seq, tool=call.tool, args=call.args, call_id=call.call_id))
            out.append(event)
        return out

    def memory(self, budget: Budget) -> dict[str, Any]:
        """What later lines depend on: the calls seen and not yet judged (the newest whose arguments fit `budget`),
        the items judged at their approval and not yet done, the turns counted."""
        calls = [[item_id, call.seq, call.tool, call.args]
                 for item_id, call in islice(reversed(self._calls.items()), KEPT_ENTRIES) if budget.value(call.args)]
        return {"calls": calls[::-1], "judged": list(islice(reversed(self._judged), KEPT_ENTRIES))[::-1],
                "prompted": self.prompted, "turns": self.turns, "reported": self._reported, "model": self.model}

    def recall(self, memory: dict[str, Any]) -> None:
        """`memory()` read back (values of the wrong type left out)."""
        for item_id, seq, tool, args in kept.entries(memory.get("calls"), 4):
            if isinstance(item_id, str) and isinstance(tool, str) and isinstance(args, dict):
                self._calls[item_id] = ev.ToolCall(seq=kept.count(seq), tool=tool, args=args, call_id=item_id)
        self._judged = dict.fromkeys(kept.texts(memory.get("judged"))[-KEPT_ENTRIES:])
        self.prompted, self._reported = kept.flag(memory.get("prompted")), kept.flag(memory.get("reported"))
        self.turns = kept.count(memory.get("turns"))
        self.model = kept.text(memory.get("model"))


def quota_of(limits: Any, before: dict[str, Any] | None) -> dict[str, Any] | None:
    """Codex's rate-limit snapshot (`account/rateLimits/updated`: primary and secondary windows, each with
    usedPercent, windowDurationMins and resetsAt in epoch seconds) as the adapter's `quota`; an update is sparse,
    so a window or plan it leaves out keeps its value from `before`."""
    if not isinstance(limits, dict):
        return before
    windows = {w["name"]: w for w in (before or {}).get("windows") or []}
    for name in ("primary", "secondary"):
        window = limits.get(name)
        if isinstance(window, dict) and isinstance(window.get("usedPercent"), (int, float)):
            windows[name] = {"name": name, "used_percent": window["usedPercent"],
                             "window_minutes": _int(window.get("windowDurationMins")),
                             "resets_at": _int(window.get("resetsAt"))}
    plan = limits.get("planType")
    return {"plan": plan if isinstance(plan, str) else (before or {}).get("plan"), "windows": list(windows.values())}


def _remember(table: dict[str, Any], key: str, value: Any = None) -> None:
    table[key] = value
    while len(table) > MAP_LIMIT:
        del table[next(iter(table))]


# ---- answering ----------------------------------------------------------------------

def _answer(request_id: Any, result: dict[str, Any] | None = None, error: str | None = None) -> bytes:
    if error is not None:
        return line({"id": request_id, "error": {"code": -32601, "message": error}})
    return line({"id": request_id, "result": result or {}})


def refusal(method: str | None, request_id: Any, why: str) -> bytes:
    """The answer to a request loopwarden does not take part in: a decline of the same shape, or an error."""
    result = _REFUSALS.get(method or "")
    return _answer(request_id, result) if result is not None else _answer(request_id, error=why)


def _unread_refusal(raw: bytes, why: str) -> bytes | None:
    """The answer to a request line loopwarden could not read (found by its id and method), or None."""
    method = _METHOD.search(raw)
    request_id = _ID.search(raw)
    if method is None or request_id is None:
        return None
    text = request_id.group(1).decode("utf-8", "replace")
    value: Any = text[1:-1] if text.startswith('"') else int(text)
    return refusal(method.group(1).decode("utf-8", "replace"), value, why)


class CodexAppServerAdapter(Adapter):
    """A live `codex app-server`: see the module docstring."""

    name = "codex"
    listed = 4
    agent = "codex"
    ladder = ladders.OPENAI
    summary = "Codex launched: app-server JSON-RPC, vetoes by declining its approval requests"
    declared = (Capability.VETO | Capability.HOLD | Capability.INJECT | Capability.STEER | Capability.INTERRUPT
                | Capability.REWIND)
    stop_grace = 3.0  # after the interrupt and the end of stdin, seconds for the app-server to exit by itself
    replay_format = "codex-app-server"  # what `codex app-server` writes on its stdout
    resumes = True  # `thread/resume {threadId}`
    keepable = True  # `memory` holds what its events do not say (the thread, the requests waiting both ways)

    def __init__(self) -> None:
        super().__init__()
        self.handshake = True  # approvals are asked for every command; a failed thread/start turns this off
        self.parser = AppServerParser()
        self.args = CodexArgs()
        self.model: str | None = None  # set by an escalation; sent with the next turn/start
        self.thread_id: str | None = None
        self.resuming: str | None = None  # the thread `thread/resume` continues, instead of a `thread/start`
        self.turn_id: str | None = None
        self.starting = False  # a turn/start is on its way
        self.turn_over = False
        self.closed = False
        self.queued: list[str] = []  # texts for the next turn
        self.turn_inputs: list[tuple[str, list[str]]] = []  # (turn id, the texts that started it), oldest first
        self._starting_inputs: list[str] = []  # the texts of the turn/start on its way
        self.rewinding: tuple[list[str], str] | None = None  # a thread/revert on its way: (input to retry, guidance)
        self._ids = 0
        self._requests: dict[int, tuple[str, str | None]] = {}  # our request id -> (method, steer text)
        self._pending: dict[int, Any] = {}  # approval line seq -> Codex's request id, until answered
        self._replies: list[bytes] = []
        self._held: set[int] = set()  # after a take-up: the approvals' seqs a gate still holds (`recall`)
        self._id_gap = 0  # ... and the request ids the first request of this daemon skips
        self._rereading = False  # a line an earlier daemon answered is read again: what it owed was sent then

    @property
    def can_inject(self) -> bool:
        return True

    @property
    def capabilities(self) -> Capability:
        caps = super().capabilities | Capability.STEER | Capability.INTERRUPT | Capability.REWIND
        return caps & self.declared

    @classmethod
    def launch_command(cls, words: list[str], env: dict[str, str] | None = None) -> list[str]:
        return launch_command(words, env)

    @classmethod
    def waits_for_client(cls, argv: list[str], env: Mapping[str, str]) -> str | None:
        if len(argv) > 1 and is_codex(argv[0]) and argv[1] == "app-server":
            return "the command is `codex app-server`, which waits for its client to speak first"
        return None

    @classmethod
    def replay_parser(cls) -> Callable[[bytes, int], list[ev.Event]]:
        return AppServerParser().parse_line

    def _request(self, method: str, params: dict[str, Any], text: str | None = None) -> bytes:
        if self._id_gap and not self._rereading:  # none of them collides with one an earlier daemon sent
            self._ids, self._id_gap = self._ids + self._id_gap, 0
        self._ids += 1
        self._requests[self._ids] = (method, text)
        while len(self._requests) > MAP_LIMIT:
            del self._requests[next(iter(self._requests))]
        return line({"id": self._ids, "method": method, "params": params})

    # ---- starting -----------------------------------------------------------
    def command(self, argv: list[str]) -> list[str]:
        self.args = split_args(_options(argv[1:]))
        return [argv[0], "app-server", *self.args.options]

    def start_lines(self) -> list[bytes]:
        thread: dict[str, Any] = {"approvalPolicy": "untrusted"}
        for key in ("cwd", "model", "sandbox"):
            if key in self.args.thread:
                thread[key] = self.args.thread[key]
        init = {"clientInfo": CLIENT_INFO, "capabilities": {"experimentalApi": True}}
        if self.args.prompt and self.resuming is None:
            self.queued.append(self.args.prompt)
        if self.resuming is not None:
            opened = self._request("thread/resume", {**thread, "threadId": self.resuming})
        else:
            opened = self._request("thread/start", thread)
        return [self._request("initialize", init), line({"method": "initialized"}), opened]

    @classmethod
    def handover(cls, command: list[str], conversation: str, cwd: str, env: Mapping[str, str]) -> Handover:
        """`codex resume ID`. Without `daemon_auto_start` off, Codex's TUI leaves a background app-server holding
        the thread after it quits, and the next `thread/resume` is refused ("already has an active writer")."""
        return Handover([command[0], "resume", conversation, "-c", "features.daemon_auto_start=false"], {})

    def resume(self, conversation: str, note: str) -> None:
        self.resuming = self.conversation = conversation
        self.resume_state = "waiting"
        self.queued.append(note)

    def _turn_start(self, inputs: list[str] | None = None) -> bytes:
        """Start the next turn with the queued texts (`inputs`: the ones a later rewind retries, when not all)."""
        texts, self.queued = self.queued, []
        self._starting_inputs = texts if inputs is None else inputs
        params: dict[str, Any] = {"threadId": self.thread_id, "input": [_text(t) for t in texts]}
        if self.model:
            params["model"] = self.model
            self.parser.model = self.model  # the usage of this turn on is that model's
        self.starting = True
        self.turn_over = False
        return self._request("turn/start", params)

    def _steer(self, text: str) -> bytes:
        return self._request("turn/steer", {"threadId": self.thread_id, "expectedTurnId": self.turn_id,
                                            "input": [_text(text)]}, text)

    # ---- kept across daemons ----------------------------------------------------
    def memory(self) -> dict[str, Any] | None:
        """The thread and turn, where the protocol stands, the requests waiting for an answer both ways, the ids
        given out, the texts still to send and each turn's input (for a rewind), bounded (see codex_memory.py)."""
        budget = Budget()
        queued = [t for t in self.queued[:KEPT_ENTRIES] if budget.text(t) is not None]
        rewinding = None
        if self.rewinding is not None:
            inputs, guidance = self.rewinding
            budget.spend(len(guidance))  # owed to the model: kept whatever its length
            rewinding = [budget.texts(inputs[:KEPT_ENTRIES]) or [], guidance]
        starting = budget.texts(self._starting_inputs[:KEPT_ENTRIES]) or []
        waiting = list(self._requests.items())[-KEPT_ENTRIES:]
        requests = [[rid, method, budget.text(said)] for rid, (method, said) in waiting]
        turns: list[list[Any]] = []
        for turn_id, inputs in reversed(self.turn_inputs[-KEPT_ENTRIES:]):  # the newest turns whose input fits
            if budget.texts([turn_id, *inputs[:KEPT_ENTRIES]]) is None:
                break
            turns.insert(0, [turn_id, inputs[:KEPT_ENTRIES]])
        return {"thread": self.thread_id, "turn": self.turn_id, "conversation": self.conversation,
                "resuming": self.resuming, "resume_state": self.resume_state, "model": self.model,
                "failure": self.failure, "handshake": self.handshake, "starting": self.starting,
                "turn_over": self.turn_over, "closed": self.closed, "queued": queued, "rewinding": rewinding,
                "starting_inputs": starting, "turn_inputs": turns, "ids": self._ids, "requests": requests,
                "pending": {str(seq): rid for seq, rid in list(self._pending.items())[-KEPT_ENTRIES:]},
                "parser": self.parser.memory(budget)}

    def recall(self, memory: dict[str, Any], held: set[int]) -> None:
        """`memory()` read back; of the approvals it lists, those `held` still wait for their answer."""
        get = memory.get
        self.thread_id, self.turn_id, self.model = (kept.text(get(k)) for k in ("thread", "turn", "model"))
        self.conversation = kept.text(get("conversation")) or self.conversation
        self.resuming, self.resume_state = kept.text(get("resuming")), kept.text(get("resume_state"))
        self.failure, self.handshake = kept.text(get("failure")), kept.flag(get("handshake"), default=True)
        self.starting, self.turn_over, self.closed = (kept.flag(get(k)) for k in ("starting", "turn_over", "closed"))
        self.queued, self._starting_inputs = kept.texts(get("queued")), kept.texts(get("starting_inputs"))
        self.turn_inputs = [(turn_id, kept.texts(inputs)) for turn_id, inputs in kept.entries(get("turn_inputs"), 2)
                            if kept.text(turn_id)]
        rewinding = get("rewinding")
        if isinstance(rewinding, list) and len(rewinding) == 2 and kept.text(rewinding[1]):
            self.rewinding = (kept.texts(rewinding[0]), rewinding[1])
        self._requests = {rid: (method, kept.text(said)) for rid, method, said in kept.entries(get("requests"), 3)
                          if kept.count(rid) and kept.text(method)}
        self._ids = max(kept.count(get("ids")), *self._requests, 0)
        pending = get("pending")
        for key, value in pending.items() if isinstance(pending, dict) else ():
            seq, rid = kept.seq_key(key), kept.request_id(value)
            if seq in held and rid is not None:
                self._pending[seq] = rid
        self._held, self._id_gap = held, kept.ID_GAP
        parser = get("parser")
        self.parser.recall(parser if isinstance(parser, dict) else {})

    def reread(self, raw: bytes, seq: int) -> None:
        """(see Adapter.reread) An approval read again waits for its answer only if a gate still holds it."""
        self._rereading = True
        super().reread(raw, seq)
        self._rereading = False
        if seq not in self._held:
            self._pending.pop(seq, None)

    # ---- reading ------------------------------------------------------------
    def parse_stdout(self, raw: bytes, seq: int) -> list[ev.Event]:
        try:
            obj = protocol.load_object(raw)
        except protocol.LineRejected as exc:
            answer = _unread_refusal(raw, f"loopwarden could not read this request ({exc})")
            if answer:  # Codex waits on every request it sends
                self._replies.append(answer)
            return [ev.InvalidLine(seq=seq, reason=str(exc), preview=protocol.preview(raw))]
        method = obj.get("method")
        if "id" in obj and isinstance(method, str):
            return self._server_request(obj, method, seq)
        if isinstance(method, str):
            dropped = method == "turn/completed" and self.rewinding is not None
            self._track(method, obj.get("params"))
            events = self.parser.feed(obj, seq)
            self.quota = self.parser.quota
            if dropped:  # the turn a rewind ends is not a failed iteration: it is no longer in the history
                events = [e for e in events if type(e) is not ev.Iteration]
            return events
        if "id" in obj:
            return self._response(obj, seq)
        return [invalid(obj, seq, "neither a request, a response nor a notification")]

    def _server_request(self, obj: dict[str, Any], method: str, seq: int) -> list[ev.Event]:
        request_id = obj["id"]
        if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
            return [invalid(obj, seq, f"{method}: the request id must be a number or a string")]
        if method not in APPROVALS or self.closed:
            self._replies.append(refusal(method, request_id, f"loopwarden does not handle {method!r}"))
            return []
        events = self.parser.feed(obj, seq)
        self._pending[seq] = request_id
        return events

    def _track(self, method: str, params: Any) -> None:
        params = params if isinstance(params, dict) else {}
        turn = params.get("turn")
        turn_id = _str(turn.get("id")) if isinstance(turn, dict) else None
        if method == "turn/started":
            self.turn_id, self.starting, self.turn_over = turn_id, False, False
            if turn_id:
                self.turn_inputs.append((turn_id, self._starting_inputs))
                del self.turn_inputs[:-MAP_LIMIT]
        elif method == "turn/completed":
            status = turn.get("status") if isinstance(turn, dict) else None
            if status == "failed":  # e.g. the model server answered 500 or is gone: the session says so at its end
                error = turn.get("error") if isinstance(turn, dict) else None
                self.failure = f"codex: the turn failed: {_error_text(error) if error else 'no reason given'}"[:500]
            elif status == "completed":
                self.failure = None
            if turn_id is None or turn_id == self.turn_id or self.turn_id is None:
                self.turn_id, self.starting, self.turn_over = None, False, True
                self._pending.clear()  # the turn's open approvals were resolved by its end
        elif method == "serverRequest/resolved":
            resolved = params.get("requestId")
            for seq in [s for s, r in self._pending.items() if r == resolved]:
                del self._pending[seq]

    def _response(self, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        request_id = obj.get("id")
        method, text = self._requests.pop(request_id, ("", None)) if isinstance(request_id, int) else ("", None)
        error = obj.get("error")
        result = obj.get("result")
        result = result if isinstance(result, dict) else {}
        if method in _OPENING and error is None:
            self.parser.opened(result)
            thread = result.get("thread")
            self.thread_id = _str(thread.get("id")) if isinstance(thread, dict) else None
            self.conversation = self.thread_id or self.conversation
            if method == "thread/resume":
                self.resume_state = "accepted"
            if self.thread_id and self.queued and not self.closed:
                self._replies.append(self._turn_start())
            return []
        if method == "thread/revert" and self.rewinding is not None:
            return self._reverted(error, seq)
        if not method and error is None and isinstance(result.get("turn"), dict) and self.turn_id is None:
            # a turn/start an earlier daemon sent after its last stored memory: that turn runs, stdin stays open
            method, self.turn_over = "turn/start", False
        if method == "turn/start" and error is None:
            turn = result.get("turn")
            if self.turn_id is None and not self.turn_over and isinstance(turn, dict):
                self.turn_id = _str(turn.get("id"))
            return []
        if error is None:
            return []
        message = _error_text(error)
        if method == "turn/steer":  # the turn ended meanwhile: the text opens the next one
            if text:
                self.queued.append(text)
            return []
        if method in ("initialize", *_OPENING, "turn/start"):
            if method == "thread/resume":
                self.resume_state, self.failure = "refused", f"codex: thread/resume failed: {message}"[:500]
            self.starting = False
            self.turn_over = True  # nothing runs: the session ends
            if method != "turn/start":
                self.handshake = False
            return [ev.Error(seq=seq, message=f"codex: {method} failed: {message}", error_type="app_server")]
        return []

    # ---- answering ------------------------------------------------------------
    def verdict_line(self, call: ev.ToolCall, verdict: Verdict | None) -> bytes | None:
        request_id = self._pending.pop(call.seq, None)
        if request_id is None:
            return None
        if verdict is not None and verdict.action == Action.BLOCK:
            # the reason first: Codex then asks the model again with it beside the declined call's output
            text = ("Message from the supervisor (loopwarden): your command was declined. "
                    f"{verdict.message or verdict.reason}")
            steer = self._steer(text) if self.turn_id and not self.closed else b""
            return steer + _answer(request_id, {"decision": "decline"})
        return _answer(request_id, {"decision": "accept"})

    def rewind_line(self, turns: int, text: str) -> bytes:
        """`thread/revert` to before the last `turns` turns; the retry (their first input, then `text`) starts
        once Codex answers. Raises ValueError (one line) when there is nothing to rewind or it is ending."""
        if self.closed:
            raise ValueError("the Codex session is ending; nothing to rewind")
        if self.rewinding is not None:
            raise ValueError("a rewind of this session is already under way")
        if not self.thread_id or not self.turn_inputs:
            raise ValueError("Codex has not started a turn yet; nothing to rewind")
        if self.starting:
            raise ValueError("a turn is starting; rewind once it runs")
        if turns < 1 or turns > len(self.turn_inputs):
            have = len(self.turn_inputs)
            raise ValueError(f"cannot rewind {turns} turns: this thread has {have} turn{'s' if have != 1 else ''}")
        turn_id, inputs = self.turn_inputs[-turns]
        del self.turn_inputs[-turns:]
        self.rewinding = (inputs, text)
        self.queued = []  # texts about the turns being dropped
        self._pending.clear()  # Codex resolves the open approvals of the turn it ends
        return self._request("thread/revert", {"threadId": self.thread_id, "beforeTurnId": turn_id})

    def _reverted(self, error: Any, seq: int) -> list[ev.Event]:
        """Codex answered the thread/revert: retry the dropped turn's input with the guidance (on an error,
        the guidance alone goes as the next message, and the error is reported)."""
        assert self.rewinding is not None
        inputs, text = self.rewinding
        self.rewinding = None
        if error is not None:
            self.queued = [text, *self.queued]
            return [ev.Error(seq=seq, message=f"codex: thread/revert failed: {_error_text(error)}",
                             error_type="app_server")]
        self.queued = [*inputs, text, *self.queued]
        if not self.closed and self.turn_id is None and not self.starting:
            self._replies.append(self._turn_start(inputs))
        return []

    def inject_line(self, text: str, kind: str, rule: str, model: str | None = None) -> bytes | None:
        if self.closed or rule == "validation":  # a bad line is the app-server's, not the model's
            return None
        if kind == "escalate" and model and model != "human":
            self.model = model
        who = "an operator, through loopwarden" if kind == "operator" else "the supervisor (loopwarden)"
        message = f"Message from {who}: {text}"
        if self.rewinding is not None:  # it follows the retried turn's input
            self.queued.append(message)
            return None
        if self.turn_id and not self.starting:
            return self._steer(message)
        self.queued.append(message)
        if self.thread_id and not self.starting and self.turn_id is None:
            return self._turn_start()
        return None

    def oversized_reply(self, head: bytes, length: int, seq: int, limit: int) -> bytes | None:
        """An over-long request still gets its answer: a decline for an approval, an error otherwise."""
        return _unread_refusal(head, f"the request is {length:,} bytes, over loopwarden's {limit:,}-byte line limit")

    def replies(self, gated: bool) -> list[bytes]:
        """Answers owed now; queued text as a steer or the next turn; and once a turn is over with
        nothing owed either way and no open gate, the end of stdin (the app-server then exits)."""
        out, self._replies = self._replies, []
        if self.closed or self.rewinding is not None:  # nothing starts or ends before Codex answers the revert
            return out
        steering = any(m == "turn/steer" for m, _ in self._requests.values())
        if self.queued and self.thread_id and not self.starting:
            if self.turn_id is None:
                out.append(self._turn_start())
            else:
                texts, self.queued = self.queued, []
                out.extend(self._steer(t) for t in texts)
        elif (self.turn_over and not gated and not self._pending and not self.queued and not steering
              and not self.starting and self.turn_id is None):
            self.closed = True
            out.append(CLOSE)
        return out

    def preface(self, text: str) -> bool:
        """A restart's summary goes first in the first turn, before the prompt."""
        self.queued.insert(0, text)
        return True

    def stop_line(self, reason: str, message: str) -> bytes | None:
        if self.closed:
            return None
        self.closed = True
        out = b"".join(_answer(r, {"decision": "decline"}) for r in self._pending.values())
        self._pending.clear()
        if self.thread_id and self.turn_id:
            out += self._request("turn/interrupt", {"threadId": self.thread_id, "turnId": self.turn_id})
        return out or None


_OPENING = ("thread/start", "thread/resume")  # the requests whose answer names the session's thread


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "text_elements": []}
