"""Claude Code launched by loopwarden: stream-json both ways, vetoes through the control protocol.

The CLI runs as `claude -p --input-format stream-json --output-format stream-json --verbose
--replay-user-messages ARGS` (docs/claude-code.md). At start loopwarden sends an
`initialize` control request that registers a PreToolUse hook callback for every tool, then the
prompt as a user line. Each `hook_callback` request becomes the ToolCall the engine judges, and
`verdict_line` answers it: `{}` (no objection) or a `permissionDecision: deny` with the verdict's
message, which the model receives as the tool's error result. A gate simply leaves the request
unanswered (the session holds the verdict). Injections are user lines; terminate is an `interrupt`
request, then stdin is closed so the CLI exits, then the usual stop of the process group. Otherwise
stdin closes once a turn is over and nothing is owed either way, not while a background sub-agent
still runs (its hook callbacks need stdin; with it closed the CLI cancels its tool calls).

The rest of the stream goes through the recorded-stream parser (`claude_code.py`); tool_use blocks
in assistant lines only remember the tool's name and parent (sub-agent lines keep the Task call id)
because the hook is where the call is judged. A tool_result whose call never reached the hook (the
hook was not registered) still gets its ToolCall, just before it.

Kept by the keeper, what the stored events do not say (the hooks still unanswered, where the turn and stdin
stand, the ids given out, the parser's counters) is stored as `memory` and read back by the next daemon.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import islice
from typing import Any

import orjson

from ..supervisor import ladders
from ..supervisor import events as ev
from ..supervisor import protocol
from ..supervisor.verdicts import Action, Verdict
from .base import Adapter, Capability, Handover, line
from .claude_code import (ID_CHARS, MAP_LIMIT, MEMORY_CALLS, ClaudeCodeParser, _remember, latest, recalled_count,
                          recalled_ids)
from .claude_launch import FIXED_ARGS, launch_command, split_args, without_conversation

HOOK_ID = "loopwarden_pre_tool_use"
HOOK_TIMEOUT = 86_400  # seconds claude waits for a verdict (a gate may hold it); past it, it skips the call
CLOSE = b""  # a reply that closes the CLI's stdin: it ends after its current turn
# what a kept session's memory carries (`memory`) besides the latest MEMORY_CALLS calls still waiting for their
# results: hooks waiting for an answer (each held by a gate), background tasks, tool_use blocks whose hook has not
# come yet, and at most CALL_ARGS_BYTES of those calls' arguments
MEMORY_PENDING = 256
MEMORY_TASKS = 32
MEMORY_UNHOOKED = 16
CALL_ARGS_BYTES = 2048
_REQUEST_ID = re.compile(rb'"request_id"\s*:\s*"([^"\\]{1,200})"')


def _control_request(request_id: str, request: dict[str, Any]) -> bytes:
    return line({"type": "control_request", "request_id": request_id, "request": request})


def _control_response(request_id: str, response: dict[str, Any] | None = None, error: str | None = None) -> bytes:
    if error is not None:
        body: dict[str, Any] = {"subtype": "error", "request_id": request_id, "error": error}
    else:
        body = {"subtype": "success", "request_id": request_id, "response": response or {}}
    return line({"type": "control_response", "response": body})


def deny(reason: str) -> dict[str, Any]:
    """A PreToolUse hook answer that vetoes the call; `reason` reaches the model as its error result."""
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def user_line(text: str) -> bytes:
    return line({"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None,
                 "session_id": "default"})


def _refusal(raw: bytes, why: str) -> bytes | None:
    """The answer to a control request loopwarden could not read: a veto for a hook, an error otherwise."""
    if b'"control_request"' not in raw:
        return None
    match = _REQUEST_ID.search(raw)
    if not match:
        return None
    request_id = match.group(1).decode("utf-8", "replace")
    if b'"hook_callback"' in raw:
        return _control_response(request_id, deny(
            f"Tool call blocked: {why}. Pass large or deeply nested content by reference (a file path) instead "
            "of inline."))
    return _control_response(request_id, error=f"request not read: {why}")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def remembered_calls(calls: dict[str, ev.ToolCall], judged: dict[str, None]) -> list[list[Any]]:
    """The latest tool_use blocks whose hook has not come (those judged need nothing more), each [call id, tool,
    agent, ts, args]; arguments beyond CALL_ARGS_BYTES in all are kept as a marker of their size."""
    out: list[list[Any]] = []
    budget = CALL_ARGS_BYTES
    for call_id in islice(reversed(calls), 4 * MEMORY_UNHOOKED):  # a hook follows its tool_use closely
        call = calls[call_id]
        if call_id in judged or len(call_id) > ID_CHARS or len(call.tool) > ID_CHARS:
            continue
        size = len(orjson.dumps(call.args, default=str))
        args = call.args if size <= budget else {"input": f"[{size:,} bytes of arguments not kept]"}
        budget -= size if size <= budget else 0
        out.append([call_id, call.tool, call.agent, call.ts, args])
        if len(out) == MEMORY_UNHOOKED:
            break
    out.reverse()
    return out


def recalled_calls(value: Any) -> dict[str, ev.ToolCall]:
    """`remembered_calls` read back: those entries that are whole."""
    calls: dict[str, ev.ToolCall] = {}
    for entry in value[-MEMORY_UNHOOKED:] if isinstance(value, list) else []:
        if not (isinstance(entry, list) and len(entry) == 5):
            continue
        call_id, tool, agent, ts, args = entry
        if isinstance(call_id, str) and isinstance(tool, str) and isinstance(args, dict):
            calls[call_id] = ev.ToolCall(seq=0, ts=ts if type(ts) is float else None, tool=tool, call_id=call_id,
                                         agent=agent if isinstance(agent, str) else None, args=args)
    return calls


def recalled_pending(value: Any, held: set[int]) -> dict[int, str]:
    """The stored pending hooks (line seq as a string -> request id) that a gate still holds."""
    pending: dict[int, str] = {}
    for key, request_id in value.items() if isinstance(value, dict) else ():
        if not (isinstance(key, str) and key.isdecimal() and len(key) < 20 and isinstance(request_id, str)):
            continue
        if int(key) in held:
            pending[int(key)] = request_id
    return pending


class ClaudeCodeAdapter(Adapter):
    """A live Claude Code CLI: see the module docstring."""

    name = "claude-code"
    listed = 3
    agent = "claude-code"
    ladder = ladders.ANTHROPIC
    summary = "Claude Code launched: stream-json, vetoes through a PreToolUse hook callback"
    declared = Capability.VETO | Capability.HOLD | Capability.INJECT | Capability.INTERRUPT
    stop_grace = 3.0  # after the interrupt, seconds for the CLI to end its turn and exit by itself
    resumes = True  # `--resume ID`
    keepable = True  # what the stored events do not say comes back through `memory` and `recall`

    def __init__(self) -> None:
        super().__init__()
        self.handshake = True  # vetoes work once `initialize` registered the hook; an error turns this off
        self.parser = ClaudeCodeParser()
        self.prompt: str | None = None
        self._ids = 0
        self._pending: dict[int, str] = {}  # hook_callback line seq -> request_id, until answered
        self._calls: dict[str, ev.ToolCall] = {}  # tool_use id -> call seen in an assistant line
        self._judged: dict[str, None] = {}  # tool_use ids that went through the hook
        self._blocked: dict[str, None] = {}  # tool_use ids vetoed: their (error) results are not events
        self._open: dict[str, None] = {}  # tool_use ids whose results have not come (what a kept session recalls)
        self._replies: list[bytes] = []
        self.sent = 0  # user lines written
        self.echoed = 0  # user lines the CLI read (--replay-user-messages echoes them)
        self.turn_over = False
        self.closed = False
        self.interrupt_id: str | None = None
        self._running: dict[str, None] = {}  # background tasks (async sub-agents) still working
        self._background: dict[str, None] = {}  # every background task id seen
        self.resuming: str | None = None  # the conversation `--resume` continues
        self._held: set[int] = set()  # taken up: the hook line seqs whose calls a gate holds (`recall`)

    @property
    def can_inject(self) -> bool:
        return True

    @property
    def capabilities(self) -> Capability:
        caps = super().capabilities | Capability.INTERRUPT  # a control_request interrupt ends the turn
        return caps & self.declared

    @classmethod
    def launch_command(cls, words: list[str], env: dict[str, str] | None = None) -> list[str]:
        return launch_command(words, env)

    # ---- kept by the keeper: what a later daemon needs (Adapter.memory, recall, reread) -------------------
    def memory(self) -> dict[str, Any]:
        """The conversation, the hooks still waiting for a verdict, where the turn and stdin stand, the ids given
        out, the calls whose results may still come and the parser's state; a few KiB at most."""
        waiting = latest(self._open, MEMORY_CALLS)
        return {"conversation": self.conversation, "resume_state": self.resume_state, "failure": self.failure,
                "handshake": self.handshake, "ids": self._ids, "interrupt_id": self.interrupt_id,
                "pending": {str(seq): request_id for seq, request_id in list(self._pending.items())[-MEMORY_PENDING:]},
                "sent": self.sent, "echoed": self.echoed, "turn_over": self.turn_over, "closed": self.closed,
                "running": latest(self._running, MEMORY_TASKS), "background": latest(self._background, MEMORY_TASKS),
                "open": waiting, "judged": [i for i in waiting if i in self._judged],
                "blocked": [i for i in waiting if i in self._blocked],
                "calls": remembered_calls(self._calls, self._judged), "parser": self.parser.memory(waiting)}

    def recall(self, memory: dict[str, Any], held: set[int]) -> None:
        """`memory()` read back at take-up; only the hooks of the calls a gate still holds (`held`) wait for an
        answer, every other one was answered. A value of the wrong type reads as the state of a new adapter."""
        self._held = set(held)
        self.conversation = _text(memory.get("conversation"))
        self.resume_state = _text(memory.get("resume_state"))
        self.failure = _text(memory.get("failure"))
        self.interrupt_id = _text(memory.get("interrupt_id"))
        self.handshake = memory.get("handshake") is not False
        self.turn_over, self.closed = memory.get("turn_over") is True, memory.get("closed") is True
        self._ids = recalled_count(memory.get("ids"))
        self.sent, self.echoed = recalled_count(memory.get("sent")), recalled_count(memory.get("echoed"))
        self._pending = recalled_pending(memory.get("pending"), self._held)
        self._running = recalled_ids(memory.get("running"), MEMORY_TASKS)
        self._background = recalled_ids(memory.get("background"), MEMORY_TASKS) | self._running
        self._open = recalled_ids(memory.get("open"), MEMORY_CALLS)
        self._judged = recalled_ids(memory.get("judged"), MEMORY_CALLS)
        self._blocked = recalled_ids(memory.get("blocked"), MEMORY_CALLS)
        self._calls = recalled_calls(memory.get("calls"))
        parser = memory.get("parser")
        self.parser.recall(parser if isinstance(parser, dict) else {})

    def reread(self, raw: bytes, seq: int) -> None:
        """A line stored after the memory was taken: read again, and its hook, unless a gate holds its call, was
        answered then."""
        super().reread(raw, seq)
        if seq not in self._held:
            self._pending.pop(seq, None)

    def _next_id(self, kind: str) -> str:
        self._ids += 1
        return f"loopwarden_{kind}_{self._ids}"

    # ---- starting -----------------------------------------------------------
    def command(self, argv: list[str]) -> list[str]:
        """The CLI in stream-json; a continue's run resumes its conversation (its id is known from the start;
        a new one's comes in `system/init`, after the first user line)."""
        args = split_args(argv[1:])
        if self.resuming is not None:
            self.conversation = self.resuming
            return [argv[0], *FIXED_ARGS, "--resume", self.resuming, *without_conversation(args.options)]
        self.prompt = args.prompt
        return [argv[0], *FIXED_ARGS, *args.options]

    @classmethod
    def handover(cls, command: list[str], conversation: str, cwd: str, env: Mapping[str, str]) -> Handover:
        """`claude --resume ID`, its first-run questions answered (sessions/claude_handover.py)."""
        from .claude_handover import answer_first_run

        answer_first_run(env, cwd)
        return Handover([command[0], "--resume", conversation], {})

    def resume(self, conversation: str, note: str) -> None:
        self.resuming, self.prompt, self.resume_state = conversation, note, "waiting"

    def spent_before(self, usd: float) -> None:
        self.parser.spent_before(usd)  # a resumed run's total_cost_usd includes the earlier runs'

    def start_lines(self) -> list[bytes]:
        hooks = {"PreToolUse": [{"matcher": None, "hookCallbackIds": [HOOK_ID], "timeout": HOOK_TIMEOUT}]}
        out = [_control_request(self._next_id("init"), {"subtype": "initialize", "hooks": hooks})]
        if self.prompt:
            out.append(self._user(self.prompt))
        return out

    def _user(self, text: str) -> bytes:
        self.sent += 1
        return user_line(text)

    # ---- reading ------------------------------------------------------------
    def parse_stdout(self, raw: bytes, seq: int) -> list[ev.Event]:
        try:
            obj = protocol.load_object(raw)
        except protocol.LineRejected as exc:
            refusal = _refusal(raw, f"loopwarden could not read its request ({exc})")
            if refusal:  # the CLI waits on every control request it sends
                self._replies.append(refusal)
            return [ev.InvalidLine(seq=seq, reason=str(exc), preview=protocol.preview(raw))]
        kind = obj.get("type")
        if kind == "control_request":
            return self._request(obj, seq)
        if kind == "control_response":
            return self._response(obj, seq)
        if kind == "control_cancel_request":  # the CLI gave up waiting (hook timeout, interrupt)
            self._forget(obj.get("request_id"))
            return []
        if kind == "user" and obj.get("isReplay") is True:
            self.echoed += 1
            self.turn_over = False
            # the prompt is the human turn; loopwarden's own injections are not events
            return self.parser.feed(obj, seq) if self.echoed == 1 else []
        if kind == "result":
            self.turn_over = True
            if self.resume_state == "waiting":  # the CLI ended before `init`: it did not know the conversation
                self.resume_state = "refused"
                errors = obj.get("errors")
                if isinstance(errors, list) and errors:
                    self.failure = ("claude: " + "; ".join(str(e) for e in errors))[:500]
        elif kind == "system":
            if obj.get("subtype") == "init" and isinstance(obj.get("session_id"), str):
                self.conversation = obj["session_id"]
                if self.resume_state == "waiting":  # an unknown id ends the CLI before `init`
                    self.resume_state = "accepted"
            self._task(obj)
        events = self._filter(self.parser.feed(obj, seq))
        self.quota = self.parser.quota
        return events

    def _task(self, obj: dict[str, Any]) -> None:
        """Background tasks outlive the turn that started them: Claude Code 2.1.330 runs an Agent
        call's sub-agent in the background and ends the turn (`result`) while it still works. Its
        tool calls still go through the hook, which needs stdin open; and once it finishes, the CLI
        runs a turn of its own to tell the model (task_notification, then a new `result`)."""
        subtype = obj.get("subtype")
        task_id = obj.get("task_id")
        if subtype == "background_tasks_changed" and isinstance(obj.get("tasks"), list):
            ids = [t.get("task_id") for t in obj["tasks"] if isinstance(t, dict)]
            self._running = {i: None for i in ids if isinstance(i, str)}
            for i in self._running:
                _remember(self._background, i, None, MAP_LIMIT)
        elif not isinstance(task_id, str):
            return
        elif subtype == "task_started" and obj.get("is_backgrounded") is True:
            _remember(self._running, task_id, None, MAP_LIMIT)
            _remember(self._background, task_id, None, MAP_LIMIT)
        elif subtype == "task_notification" and task_id in self._background:
            self._running.pop(task_id, None)
            self.turn_over = False  # the notification starts a turn, which ends in its own `result`

    def _filter(self, events: list[ev.Event]) -> list[ev.Event]:
        out: list[ev.Event] = []
        for event in events:
            if type(event) is ev.ToolCall:
                if event.call_id:  # judged at its hook_callback
                    _remember(self._calls, event.call_id, event)
                    _remember(self._open, event.call_id, None)
                    continue
            elif type(event) is ev.ToolResult and event.call_id:
                self._open.pop(event.call_id, None)
                if event.call_id in self._blocked:
                    continue  # a vetoed call has no result, as in the native protocol
                call = self._calls.get(event.call_id)
                if call is not None and event.call_id not in self._judged:
                    out.append(ev.ToolCall(seq=event.seq, ts=call.ts, agent=call.agent, tool=call.tool,
                                           args=call.args, call_id=call.call_id))
                    _remember(self._judged, event.call_id, None)
            out.append(event)
        return out

    def _request(self, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        request_id = obj.get("request_id")
        request = obj.get("request")
        if not isinstance(request_id, str) or not isinstance(request, dict):
            return []
        subtype = request.get("subtype")
        hook = request.get("input")
        hook = hook if isinstance(hook, dict) else {}
        if subtype == "hook_callback" and hook.get("hook_event_name") == "PreToolUse":
            return self._pre_tool_use(request_id, request, hook, seq)
        if subtype == "hook_callback":
            self._replies.append(_control_response(request_id, {}))
        elif subtype == "can_use_tool":  # only with --permission-prompt-tool stdio: loopwarden is no prompt
            message = "loopwarden does not answer permission prompts; allow tools with --allowedTools"
            self._replies.append(_control_response(request_id, {"behavior": "deny", "message": message}))
        else:
            self._replies.append(_control_response(request_id, error=f"loopwarden does not handle {subtype!r}"))
        return []

    def _pre_tool_use(self, request_id: str, request: dict[str, Any], hook: dict[str, Any],
                      seq: int) -> list[ev.Event]:
        call_id = hook.get("tool_use_id") or request.get("tool_use_id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        name = hook.get("tool_name")
        tool = name if isinstance(name, str) and name else "unknown"
        args = hook.get("tool_input")
        seen = self._calls.get(call_id) if call_id else None
        agent = seen.agent if seen else (hook.get("agent_id") if isinstance(hook.get("agent_id"), str) else None)
        self._pending[seq] = request_id
        if call_id:
            _remember(self._judged, call_id, None)
            _remember(self._open, call_id, None)
        return [ev.ToolCall(seq=seq, agent=agent, tool=tool, call_id=call_id,
                            args=args if isinstance(args, dict) else {"input": args})]

    def _response(self, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        body = obj.get("response")
        body = body if isinstance(body, dict) else {}
        request_id = body.get("request_id")
        if body.get("subtype") == "error" and isinstance(request_id, str) and request_id.startswith("loopwarden_init"):
            self.handshake = False  # no hook: calls are only observed, and blocks become nudges
            message = f"claude-code: initialize failed, tool calls cannot be vetoed: {body.get('error')}"
            return [ev.Error(seq=seq, message=message, error_type="control_protocol")]
        return []

    def _forget(self, request_id: Any) -> None:
        for key in [k for k, v in self._pending.items() if v == request_id]:
            del self._pending[key]

    # ---- answering ------------------------------------------------------------
    def verdict_line(self, call: ev.ToolCall, verdict: Verdict | None) -> bytes | None:
        request_id = self._pending.pop(call.seq, None)
        blocked = verdict is not None and verdict.action == Action.BLOCK
        if blocked and call.call_id:
            _remember(self._blocked, call.call_id, None, MAP_LIMIT)
        if request_id is None:
            return None
        if blocked and verdict is not None:
            return _control_response(request_id, deny(verdict.message or verdict.reason))
        return _control_response(request_id, {})

    def inject_line(self, text: str, kind: str, rule: str, model: str | None = None) -> bytes | None:
        if self.closed or rule == "validation":  # a bad line is the CLI's, not the model's: nothing to say
            return None
        who = "an operator, through loopwarden" if kind == "operator" else "the supervisor (loopwarden)"
        data = self._user(f"Message from {who}: {text}")
        if kind == "escalate" and model and model != "human":
            data = _control_request(self._next_id("model"), {"subtype": "set_model", "model": model}) + data
        return data

    def oversized_reply(self, head: bytes, length: int, seq: int, limit: int) -> bytes | None:
        """An over-long control request still gets its answer: a veto for a hook, an error otherwise."""
        return _refusal(head, f"its input is {length:,} bytes, over loopwarden's {limit:,}-byte line limit")

    def replies(self, gated: bool) -> list[bytes]:
        """Answers owed now; and once a turn is over with nothing left for the CLI to read, no
        pending hook, no open gate and no background task still running, the end of its stdin
        (it then exits, as `claude -p` does)."""
        out, self._replies = self._replies, []
        if (self.turn_over and not self.closed and not gated and not self._pending and not self._running
                and self.echoed >= self.sent):
            self.closed = True
            out.append(CLOSE)
        return out

    def stop_line(self, reason: str, message: str) -> bytes | None:
        if self.closed:
            return None
        self.interrupt_id = self._next_id("interrupt")
        self.closed = True
        return _control_request(self.interrupt_id, {"subtype": "interrupt"})
