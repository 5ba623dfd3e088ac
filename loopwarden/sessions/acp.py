"""Any agent that speaks the Agent Client Protocol (ACP) over stdio: JSON-RPC lines, vetoes by rejecting
its permission requests.

Launch: `loopwarden run --adapter acp -- AGENT COMMAND... -- PROMPT`: the words before the second `--`
start the agent (e.g. `gemini --acp`, `opencode acp`, `claude-agent-acp`), the words after it are the
prompt. At start loopwarden sends `initialize` (no fs, no terminal: every file and shell action stays
the agent's own, and is asked about), then `session/new {cwd, mcpServers: []}`, then `session/prompt`.

Each `session/request_permission` is the ToolCall the engine judges; `verdict_line` answers it with the
option of kind `allow_once` or `reject_once`, chosen by kind (never an `*_always` option; with no such
option the answer is `cancelled`). A gate leaves the request unanswered. ACP carries no reason with a
rejection, so the verdict's message, like any nudge, guidance or operator text, goes to the model as the
next `session/prompt` once the running turn ends. Terminate is a `session/cancel` and a `cancelled`
answer to every pending request; the session's processes are then stopped. A turn that ends with nothing
owed either way closes stdin. Every request the agent sends is answered, even one loopwarden cannot read
or does not handle (`fs/*`, `terminal/*`, anything else: a JSON-RPC error), so it never waits forever.

A known agent's `AgentHooks` (found by `hooks_for`) may add to this: Claude's (`acp_claude.py`) send its
private layer with `session/new`, switch a mode that never asks, steer text into the running turn, close
and resume the session after a cancelled turn, and close the session before stdin's end.

`AcpParser` maps the stream to Events without answering anything; `loopwarden replay --format acp`
uses it alone. The `agent-client-protocol` package is not used: its Connection owns the asyncio streams
and dispatch that LiveSession owns here, and its pydantic models reject the partial or unknown shapes
this reader must tolerate line by line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import orjson

from ..supervisor import events as ev
from ..supervisor import protocol
from ..supervisor.changes import LIMIT as DIFF_LIMIT
from ..supervisor.verdicts import Action, Verdict
from . import acp_agents, acp_kept
from .acp_programs import AcpPrograms, split_words
from .base import Capability, line
from .recorded import RecordParser, invalid, launch_model

CLOSE = b""  # a reply that closes the agent's stdin
CLIENT_INFO = {"name": "loopwarden", "title": "loopwarden", "version": "1"}
PERMISSION = "session/request_permission"
CANCELLED = {"outcome": {"outcome": "cancelled"}}
MAP_LIMIT = 4096  # remembered tool calls, requests, pending answers
DIFF_BLOCKS = 20  # `diff` blocks of one tool call kept in its arguments
MESSAGE_LIMIT = 64 * 1024  # characters of one assistant message kept from its chunks
OUTPUT_LIMIT = 256 * 1024  # characters of one tool result kept
DONE = ("completed", "failed")
USAGE = ("used", "size")

_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{1,200}")')
_METHOD = re.compile(rb'"method"\s*:\s*"([^"\\]{1,200})"')


# ---- reading ----------------------------------------------------------------------

def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_FENCE_OPEN = re.compile(r"```[\w+.-]*[ \t]*\Z")  # matched against the first line alone: no search of the text


def _unfenced(text: str) -> str:
    """A tool result's text without the Markdown fence claude-agent-acp wraps it in (```console ... ```), so that
    its first line is the output's, not the fence's; any other text as it is. Cut by string operations, each
    linear: a long output with no closing fence is no slow search."""
    body = text.lstrip()
    first, newline, rest = body.partition("\n")
    if not newline or not _FENCE_OPEN.match(first):
        return text
    rest = rest.rstrip()
    head, _, last = rest.rpartition("\n")
    return head if last.strip() == "```" else ("" if rest.strip() == "```" else rest)


def content_text(content: Any, limit: int = OUTPUT_LIMIT) -> str:
    """The text of ACP tool call content (a list of `content`, `diff` or `terminal` blocks), bounded."""
    parts: list[str] = []
    blocks = content if isinstance(content, list) else [content]
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "content":
            inner = block.get("content")
            if isinstance(inner, dict) and isinstance(inner.get("text"), str):
                parts.append(_unfenced(inner["text"]))
        elif kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "diff":
            parts.append(f"diff {block.get('path', '?')}")
        elif kind == "terminal":
            parts.append(f"terminal {block.get('terminalId', '?')}")
    return "\n".join(parts)[:limit]


def _raw_output(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value[:OUTPUT_LIMIT]
    try:
        return orjson.dumps(value).decode()[:OUTPUT_LIMIT]
    except (TypeError, orjson.JSONEncodeError):
        return ""


def _call_args(call: dict[str, Any]) -> dict[str, Any]:
    """What the engine compares: the agent's raw input where given, else the call's title."""
    raw = call.get("rawInput")
    if isinstance(raw, dict) and raw:
        return dict(raw)
    title = call.get("title")
    return {"title": title if isinstance(title, str) else ""}


def _with_diffs(args: dict[str, Any], content: Any) -> dict[str, Any]:
    """`args` with the call content's `diff` blocks kept (bounded) as `diffs`, so its change can be shown."""
    if not isinstance(content, list) or "diffs" in args:
        return args
    diffs = [{"path": b["path"], "oldText": _clipped(b.get("oldText")), "newText": _clipped(b.get("newText"))}
             for b in content[:DIFF_BLOCKS] if isinstance(b, dict) and b.get("type") == "diff"
             and isinstance(b.get("path"), str)]
    return {**args, "diffs": diffs} if diffs else args


def _clipped(text: Any) -> str | None:
    return text[:DIFF_LIMIT] if isinstance(text, str) else None


def _tool(call: dict[str, Any]) -> str:
    return _str(call.get("kind")) or "other"


def _remember(table: dict[Any, Any], key: Any, value: Any = None) -> None:
    table[key] = value
    while len(table) > MAP_LIMIT:
        del table[next(iter(table))]


class AcpParser(RecordParser):
    """Turns one ACP agent's stdout stream into Events; keep one instance per stream.

    A permission request is the ToolCall; a call never asked about gets its ToolCall just before its
    result. Message chunks are joined (bounded) into one AssistantMessage, written when something else
    arrives or the turn ends."""

    def __init__(self) -> None:
        self._calls: dict[str, ev.ToolCall] = {}  # toolCallId -> call seen in an update, not yet emitted
        self._judged: dict[str, None] = {}  # toolCallIds whose ToolCall was emitted at their permission request
        self._chunks: list[str] = []
        self._chunk_chars = 0
        self.turns = 0
        self.model: str | None = None  # session/new's models.currentModelId, or the launch's --model
        self.cost_total: float | None = None  # the agent's own running cost in USD (usage_update), if it says
        self.cost_billed = 0.0  # of it, what earlier turns' usage carried

    def feed(self, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        """A request, a notification, or the end of a prompt turn (a response with a `stopReason`)."""
        method = obj.get("method")
        params = obj.get("params")
        params = params if isinstance(params, dict) else {}
        if method == PERMISSION and "id" in obj:
            return self.permission(params, seq)
        if method == "session/update":
            return self.update(obj, params, seq)
        if method is None and "id" in obj:
            result = obj.get("result")
            if isinstance(result, dict) and "stopReason" in result:
                return self.turn_end(result, seq)
            if isinstance(result, dict) and "sessionId" in result:
                self.opened(result)
            if "error" in obj and isinstance(obj["error"], dict) and self._chunks:
                return self.flush(seq)
        return []

    def flush(self, seq: int) -> list[ev.Event]:
        """The buffered message chunks as one AssistantMessage (none when empty)."""
        if not self._chunks:
            return []
        text, self._chunks, self._chunk_chars = "".join(self._chunks), [], 0
        return [ev.AssistantMessage(seq=seq, text=text)] if text.strip() else []

    def permission(self, params: dict[str, Any], seq: int) -> list[ev.Event]:
        call = params.get("toolCall")
        call = call if isinstance(call, dict) else {}
        call_id = _str(call.get("toolCallId"))
        seen = self._calls.pop(call_id, None) if call_id else None
        args = _call_args(call)
        if seen is not None and set(args) == {"title"} and set(seen.args) != {"title"}:
            args = dict(seen.args)  # the update carried the raw input, the request only a title
        args = _with_diffs(args, call.get("content"))
        tool = _str(call.get("kind")) or (seen.tool if seen else "other")
        if call_id:
            _remember(self._judged, call_id)
        return [*self.flush(seq), ev.ToolCall(seq=seq, tool=tool, args=args, call_id=call_id)]

    def update(self, obj: dict[str, Any], params: dict[str, Any], seq: int) -> list[ev.Event]:
        upd = params.get("update")
        if not isinstance(upd, dict) or not isinstance(upd.get("sessionUpdate"), str):
            return [invalid(obj, seq, "session/update: 'update' must be an object with a 'sessionUpdate'")]
        kind = upd["sessionUpdate"]
        if kind == "agent_message_chunk":
            content = upd.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            if isinstance(text, str) and self._chunk_chars < MESSAGE_LIMIT:
                text = text[: MESSAGE_LIMIT - self._chunk_chars]
                self._chunks.append(text)
                self._chunk_chars += len(text)
            return []
        if kind in ("agent_thought_chunk", "user_message_chunk", "available_commands_update",
                    "current_mode_update", "session_info_update", "config_option_update"):
            return []
        out = self.flush(seq)
        if kind in ("tool_call", "tool_call_update"):
            return out + self._tool_update(upd, seq)
        if kind == "plan":
            entries = upd.get("entries")
            rows = [f"- [{e.get('status', '?')}] {e.get('content', '')}" for e in
                    (entries if isinstance(entries, list) else []) if isinstance(e, dict)]
            return out + ([ev.AssistantMessage(seq=seq, text="Plan:\n" + "\n".join(rows))] if rows else [])
        if kind == "usage_update":  # `used` is the context window's fill, not tokens spent in this turn; `cost`
            cost = upd.get("cost")      # is the session's running cost, carried by the turn's usage
            if isinstance(cost, dict) and cost.get("currency") == "USD" and _number(cost.get("amount")):
                self.cost_total = float(cost["amount"])
        return out

    def opened(self, result: dict[str, Any]) -> None:
        """session/new's answer: the model it runs (`models.currentModelId`; an alias such as Gemini's "auto"
        names none, and each turn's usage names its own)."""
        models = result.get("models")
        current = _model(models.get("currentModelId")) if isinstance(models, dict) else None
        if current and not current.startswith("auto"):
            self.model = current

    def _usages(self, result: dict[str, Any], seq: int) -> list[ev.Usage]:
        """A prompt's usage: ACP's `usage` (its counts are disjoint: input, cache reads and cache writes add up to
        every input token), else Gemini CLI's `_meta.quota` (a usage per model it ran)."""
        usage = result.get("usage")
        if isinstance(usage, dict):
            read, write = _int(usage.get("cachedReadTokens")) or 0, _int(usage.get("cachedWriteTokens")) or 0
            return [ev.Usage(seq=seq, input_tokens=(_int(usage.get("inputTokens")) or 0) + read + write,
                             output_tokens=_int(usage.get("outputTokens")) or 0, model=self.model,
                             cache_read_tokens=read, cache_write_tokens=write)]
        meta = result.get("_meta")
        quota = meta.get("quota") if isinstance(meta, dict) else None
        if not isinstance(quota, dict):
            return []
        out = []
        entries = quota.get("model_usage")
        for entry in entries if isinstance(entries, list) else []:
            counts = entry.get("token_count") if isinstance(entry, dict) else None
            if isinstance(counts, dict):
                out.append(ev.Usage(seq=seq, input_tokens=_int(counts.get("input_tokens")) or 0,
                                    output_tokens=_int(counts.get("output_tokens")) or 0,
                                    model=_model(entry.get("model")) or self.model))
        counts = quota.get("token_count")
        if not out and isinstance(counts, dict) and (counts.get("input_tokens") or counts.get("output_tokens")):
            out.append(ev.Usage(seq=seq, input_tokens=_int(counts.get("input_tokens")) or 0,
                                output_tokens=_int(counts.get("output_tokens")) or 0, model=self.model))
        return out

    def _tool_update(self, upd: dict[str, Any], seq: int) -> list[ev.Event]:
        call_id = _str(upd.get("toolCallId"))
        if call_id is None:
            return []
        status = upd.get("status")
        out: list[ev.Event] = []
        judged = call_id in self._judged
        if not judged:
            call = self._calls.get(call_id)
            if call is None or "rawInput" in upd or upd.get("title"):
                base = dict(call.args) if call is not None else {}
                args = _call_args(upd)
                if set(args) == {"title"} and base and (set(base) != {"title"} or not args["title"]):
                    args = base
                args = _with_diffs(args, upd.get("content"))
                tool = _str(upd.get("kind")) or (call.tool if call else "other")
                call = ev.ToolCall(seq=seq, tool=tool, args=args, call_id=call_id)
                _remember(self._calls, call_id, call)
        if status not in DONE:
            return out
        if judged:
            self._judged.pop(call_id, None)
        else:
            call = self._calls.pop(call_id)
            out.append(ev.ToolCall(seq=seq, tool=call.tool, args=call.args, call_id=call_id))
        text = content_text(upd.get("content")) or _raw_output(upd.get("rawOutput"))
        out.append(ev.ToolResult(seq=seq, output=text, call_id=call_id, is_error=status == "failed"))
        return out

    def turn_end(self, result: dict[str, Any], seq: int) -> list[ev.Event]:
        out = self.flush(seq)
        usages = self._usages(result, seq)
        if self.cost_total is not None and usages:  # the agent's own figure wins: this turn's part of its total
            cost = self.cost_total - self.cost_billed if self.cost_total >= self.cost_billed else self.cost_total
            self.cost_billed = self.cost_total
            usages[0].cost_usd = cost
            for other in usages[1:]:
                other.cost_usd = 0.0
        if self.cost_total is not None and not usages and self.cost_total != self.cost_billed:
            # a cost told (usage_update) with no usage in the response: billed all the same, with no tokens
            cost = self.cost_total - self.cost_billed if self.cost_total >= self.cost_billed else self.cost_total
            self.cost_billed = self.cost_total
            usages = [ev.Usage(seq=seq, input_tokens=0, output_tokens=0, cost_usd=cost, model=self.model)]
        out.extend(usages)
        self.turns += 1
        reason = result.get("stopReason")
        if reason == "end_turn":
            out.append(ev.Iteration(seq=seq, n=self.turns, status="pass"))
        else:
            out.append(ev.Iteration(seq=seq, n=self.turns, status="fail", error=f"stopReason {reason}"))
        return out


# ---- answering ----------------------------------------------------------------------

def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _model(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


def _answer(request_id: Any, result: dict[str, Any] | None = None, error: str | None = None,
            code: int = -32601) -> bytes:
    if error is not None:
        return line({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": error}})
    return line({"jsonrpc": "2.0", "id": request_id, "result": result or {}})


def refusal(method: str | None, request_id: Any, why: str) -> bytes:
    """The answer to a request loopwarden does not take part in: `cancelled` for a permission, else an error."""
    if method == PERMISSION:
        return _answer(request_id, CANCELLED)
    return _answer(request_id, error=why)


def _unread_refusal(raw: bytes, why: str) -> bytes | None:
    """The answer to a request line loopwarden could not read (found by its id and method), or None."""
    method = _METHOD.search(raw)
    request_id = _ID.search(raw)
    if method is None or request_id is None:
        return None
    text = request_id.group(1).decode("utf-8", "replace")
    value: Any = text[1:-1] if text.startswith('"') else int(text)
    return refusal(method.group(1).decode("utf-8", "replace"), value, why)


def choose(options: Any, kind: str) -> str | None:
    """The optionId of the first option of this kind (`allow_once` or `reject_once`), or None."""
    for option in options if isinstance(options, list) else []:
        if isinstance(option, dict) and option.get("kind") == kind and isinstance(option.get("optionId"), str):
            return str(option["optionId"])
    return None


class AgentHooks:
    """What one known agent needs beyond the protocol (sessions/acp_claude.py); these defaults add nothing."""

    steers = False  # a prompt sent while a turn runs is queued into that turn (Claude's promptQueueing)
    reopen_after_cancel = False  # session/close then session/resume before the prompt after a cancelled turn
    close_before_exit = False  # session/close before stdin's end (an agent that would not exit otherwise)

    def session_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """`session/new` and `session/resume` parameters, with what the agent's private layer adds."""
        return params

    def setup(self, session_id: str, result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Requests to send once a session is made or resumed (its `result`), answered before any prompt."""
        return []


_REOPEN = ("session/resume", "session/load")  # how a continue opens an earlier session


def resume_method(initialized: dict[str, Any]) -> str | None:
    """How an agent whose `initialize` answered `initialized` continues an earlier session: `session/resume`
    (no replay of its history) where it advertises it, else `session/load`; None when it advertises neither."""
    caps = initialized.get("agentCapabilities")
    caps = caps if isinstance(caps, dict) else {}
    session = caps.get("sessionCapabilities")
    if isinstance(session, dict) and isinstance(session.get("resume"), dict):
        return "session/resume"
    return "session/load" if caps.get("loadSession") is True else None


def hooks_for(agent: list[str]) -> AgentHooks:
    """The hooks of the known agent that `agent` (its command) starts; the defaults for any other."""
    from . import acp_claude

    known = acp_agents.agent_of(agent, {})
    return acp_claude.ClaudeAcpHooks() if known is not None and known.name == "claude-acp" else AgentHooks()


class AcpAdapter(AcpPrograms):
    """A live ACP agent (what it knows of the programs it launches: AcpPrograms): see the module docstring."""

    name = "acp"
    listed = 5
    agent = "acp"
    summary = "any Agent Client Protocol agent (gemini --acp, opencode acp, claude-agent-acp): vetoes by rejecting"
    declared = Capability.VETO | Capability.HOLD | Capability.INJECT | Capability.STEER | Capability.INTERRUPT
    stop_grace = 1.5  # after the cancel and the end of stdin, seconds for the agent to exit by itself
    replay_format = "acp"  # what an ACP agent writes on its stdout
    resumes = True  # `session/resume` or `session/load`, where the agent advertises one in `initialize`
    keepable = True  # what it knows of the protocol comes back from its memory (sessions/acp_kept.py)

    def __init__(self) -> None:
        super().__init__()
        self.handshake = True  # every call the agent asks about waits for the answer
        self.parser = AcpParser()
        self.prompt: str | None = None
        self.session_id: str | None = None
        self.running = False  # a session/prompt is unanswered
        self.turn_over = False
        self.closed = False
        self.prompted = False
        self.queued: list[str] = []  # texts for the next prompt
        self._ids = 0
        self._requests: dict[int, str] = {}  # our request id -> method
        self._pending: dict[int, tuple[Any, Any]] = {}  # permission line seq -> (request id, options)
        self._replies: list[bytes] = []
        self.hooks = AgentHooks()
        self.prompts_out = 0  # session/prompt requests unanswered (more than one only when the agent steers)
        self.setting_up = 0  # the hooks' setup requests unanswered: no prompt until they are
        self.reopen = False  # the last turn was cancelled: close and resume the session before the next prompt
        self.reopening = False
        self.closing = False  # session/close sent before stdin's end
        self.resuming: str | None = None  # the session a continue loads or resumes, instead of a session/new
        self.loading = False  # a session/load is unanswered: the history it replays is not this run's events
        self.resuming_as = acp_agents.Resuming()  # what the agent needs beyond the protocol to continue
        self._held: set[int] = set()  # taken up: the permission requests' seqs a gate still holds
        self._started_only = False  # taken up with no memory stored: the agent was sent its start lines alone

    @property
    def can_inject(self) -> bool:
        return True

    @property
    def capabilities(self) -> Capability:
        steer = Capability.STEER if self.hooks.steers else Capability.NONE  # only where the agent queues prompts
        return (super().capabilities | Capability.INTERRUPT | steer) & self.declared

    @classmethod
    def replay_parser(cls) -> Callable[[bytes, int], list[ev.Event]]:
        return AcpParser().parse_line

    def _request(self, method: str, params: dict[str, Any]) -> bytes:
        self._ids += 1
        _remember(self._requests, self._ids, method)
        return line({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})

    # ---- starting -----------------------------------------------------------
    def command(self, argv: list[str]) -> list[str]:
        model = launch_model(split_words(argv)[0])  # the launch's model, until the agent names its own
        if model is not None:
            self.parser.model = model
        return self._command(argv)

    def _command(self, argv: list[str]) -> list[str]:
        agent, self.prompt = split_words(argv)
        self.hooks = hooks_for(agent)
        known = acp_agents.agent_of(agent, {})
        self.agent = known.name if known is not None else "acp"  # shown as the session's agent kind
        self.resuming_as = known.resuming if known is not None else acp_agents.Resuming()
        if self._started_only:  # taken up with no memory: what the earlier daemon sent it first, known again
            self._started_only = False
            self.start_lines()
        return agent

    def start_lines(self) -> list[bytes]:
        if self.prompt and self.resuming is None:  # a resumed run's first message is the continue's note
            self.queued.append(self.prompt)
        init = {"protocolVersion": 1, "clientInfo": CLIENT_INFO,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}}
        return [self._request("initialize", init)]

    def _prompt(self) -> bytes:
        if self.reopen:  # the prompt waits for the session to be closed and resumed
            self.reopen, self.reopening = False, True
            return self._request("session/close", {"sessionId": self.session_id})
        texts, self.queued = self.queued, []
        self.running, self.turn_over = True, False
        self.prompts_out += 1
        return self._request("session/prompt", {"sessionId": self.session_id,
                                                "prompt": [{"type": "text", "text": "\n\n".join(texts)}]})

    # ---- reading ------------------------------------------------------------
    def parse_stdout(self, raw: bytes, seq: int) -> list[ev.Event]:
        try:
            obj = protocol.load_object(raw)
        except protocol.LineRejected as exc:
            answer = _unread_refusal(raw, f"loopwarden could not read this request ({exc})")
            if answer:  # the agent waits on every request it sends
                self._replies.append(answer)
            return [ev.InvalidLine(seq=seq, reason=str(exc), preview=protocol.preview(raw))]
        method = obj.get("method")
        if "id" in obj and isinstance(method, str):
            return self._agent_request(obj, method, seq)
        if isinstance(method, str):
            if self.loading:
                return self._replayed(obj, seq)
            return self.parser.feed(obj, seq)
        if "id" in obj:
            return self._response(obj, seq)
        return [invalid(obj, seq, "neither a request, a response nor a notification")]

    def _agent_request(self, obj: dict[str, Any], method: str, seq: int) -> list[ev.Event]:
        request_id = obj["id"]
        if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
            return [invalid(obj, seq, f"{method}: the request id must be a number or a string")]
        if method != PERMISSION:
            self._replies.append(refusal(method, request_id, f"loopwarden does not handle {method!r}"))
            return []
        if self.closed:
            self._replies.append(_answer(request_id, CANCELLED))
            return []
        events = self.parser.feed(obj, seq)
        params = obj.get("params")
        options = params.get("options") if isinstance(params, dict) else None
        _remember(self._pending, seq, (request_id, options))
        return events

    def _response(self, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        request_id = obj.get("id")
        method = self._requests.pop(request_id, "") if isinstance(request_id, int) else ""
        result = obj.get("result")
        if not method and isinstance(result, dict) and "stopReason" in result:
            method = "session/prompt"  # sent by an earlier daemon after the memory it left (sessions/acp_kept.py)
        error = obj.get("error")
        if error is not None:
            message = str(error.get("message") or "error") if isinstance(error, dict) else str(error)
            return self._failed(method, request_id, message, seq)
        result = result if isinstance(result, dict) else {}
        if method == "initialize":
            return self._open(result, seq)
        if method == "session/new" or (method in _REOPEN and not self.reopening):
            if method in _REOPEN:
                self.resume_state = "accepted"
                if self.loading and self.resuming_as.replays_after_load:
                    return []  # the first prompt waits for the end of the replay (`_replayed`)
            self.loading = False
            return self._session_new({"sessionId": self.resuming, **result} if method in _REOPEN else result, seq)
        if method == "session/prompt":
            return self._prompt_answered(request_id, result, seq)
        return self._reopened_or_setup(method, result, seq)

    def _failed(self, method: str, request_id: Any, message: str, seq: int) -> list[ev.Event]:
        """An error answer to one of our requests: a failed prompt ends the turn, a failed start the session."""
        if method == "session/prompt":
            self.prompts_out = max(0, self.prompts_out - 1)
            if self.prompts_out:  # a later prompt of the same turn is still unanswered
                return []
            if self.closed:  # stopped by loopwarden (Claude: the session closed under the turn): cancelled
                self.running, self.turn_over = False, True
                self._pending.clear()
                return self.parser.feed({"id": request_id, "result": {"stopReason": "cancelled"}}, seq)
            self.running, self.turn_over = False, True
            self.failure = f"acp: session/prompt failed: {message}"[:500]
            self._pending.clear()
            return [*self.parser.flush(seq), ev.Error(seq=seq, message=self.failure, error_type="acp")]
        if method in ("initialize", "session/new") or (method in _REOPEN and not self.reopening):
            self.loading = False
            if method in _REOPEN:
                self.resume_state = "refused"
            self.handshake = method != "initialize"
            self.turn_over = True  # nothing runs: the session ends
            self.failure = f"acp: {method} failed: {message}"[:500]
            return [ev.Error(seq=seq, message=self.failure, error_type="acp")]
        if method == "session/resume":
            self.reopening, self.turn_over, self.queued = False, True, []
            self.failure = f"acp: session/resume after a cancel failed: {message}"[:500]
            return [ev.Error(seq=seq, message=self.failure, error_type="acp")]
        return self._reopened_or_setup(method, {}, seq)

    def _open(self, result: dict[str, Any], seq: int) -> list[ev.Event]:
        """`initialize` answered: a new session, or the one a continue resumes (as the agent advertises)."""
        if self.closed:
            return []
        params = {"cwd": self.cwd or os.getcwd(), "mcpServers": []}
        if self.resuming is None:
            self._replies.append(self._request("session/new", self.hooks.session_params(params)))
            return []
        method = resume_method(result)
        if method is None:
            self.turn_over, self.resume_state = True, "refused"
            self.failure = ("acp: the agent advertises neither session/resume nor session/load in initialize, so its "
                            "conversation cannot be continued")
            return [ev.Error(seq=seq, message=self.failure, error_type="acp")]
        self.loading = method == "session/load"
        params = {**params, "sessionId": self.resuming}
        self._replies.append(self._request(method, self.hooks.session_params(params) if method != "session/load"
                                           else params))
        return []

    def _replayed(self, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        """A notification while a loaded session's history is replayed: not this run's. An agent that replays
        after its answer ends the replay with its commands, and the first prompt goes then."""
        params = obj.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if self.resume_state == "accepted" and kind == "available_commands_update":
            self.loading = False
            return self._session_new({"sessionId": self.resuming}, seq)
        return []

    def resume(self, conversation: str, note: str) -> None:
        self.resuming = self.conversation = conversation
        self.resume_state = "waiting"
        self.queued.append(note)

    def _session_new(self, result: dict[str, Any], seq: int) -> list[ev.Event]:
        """The session exists: its first prompt (what was queued), or its setup first."""
        self.session_id = self.conversation = _str(result.get("sessionId"))
        self.parser.opened(result)
        if self.session_id is None:
            self.turn_over = True
            self.failure = "acp: session/new answered without a sessionId"
            return [ev.Error(seq=seq, message=self.failure, error_type="acp")]
        out: list[ev.Event] = []
        if self.queued and not self.closed:
            if not self.prompted:
                out.append(ev.UserMessage(seq=seq, text="\n\n".join(self.queued)))
            self.prompted = True
            self._setup(result)
        else:
            self.turn_over = True
        return out

    def _prompt_answered(self, request_id: Any, result: dict[str, Any], seq: int) -> list[ev.Event]:
        """A turn ended (unless a later prompt of it is still out): how it stopped."""
        self.prompts_out = max(0, self.prompts_out - 1)
        if self.prompts_out:  # handed off: the turn goes on under a later prompt (the agent steers)
            return []
        if result.get("stopReason") == "cancelled" and self.hooks.reopen_after_cancel and not self.closed:
            self.reopen = True
        self.running, self.turn_over = False, True
        self._pending.clear()  # the turn's open requests were resolved by its end
        reason = result.get("stopReason")
        if reason in ("end_turn", "cancelled"):
            self.failure = None
        elif reason is not None:
            self.failure = f"acp: the turn stopped: {reason}"[:500]
        return self.parser.feed({"id": request_id, "result": {**result, "stopReason": reason}}, seq)

    def _setup(self, result: dict[str, Any]) -> None:
        """After session/new or session/resume: the hooks' setup requests, else the prompt."""
        setup = self.hooks.setup(self.session_id, result) if self.session_id else []
        self.setting_up = len(setup)
        self._replies.extend(self._request(method, params) for method, params in setup)
        if not setup and not self.closed:
            self._replies.append(self._prompt())

    def _reopened_or_setup(self, method: str, result: dict[str, Any], seq: int) -> list[ev.Event]:
        """session/close answered: resume; session/resume answered: set up; the last setup answer: prompt.
        A setup request that failed still counts as answered (the session runs as the agent set it up)."""
        if self.closed:
            return []
        if method == "session/close" and self.closing:
            self.closed = True
            self._replies.append(CLOSE)
        elif method == "session/close" and self.reopening:
            self._replies.append(self._request("session/resume", self.hooks.session_params(
                {"sessionId": self.session_id, "cwd": self.cwd or os.getcwd(), "mcpServers": []})))
        elif method == "session/resume" and self.reopening:
            self.reopening = False
            self._setup(result)
        elif self.setting_up:
            self.setting_up -= 1
            if not self.setting_up:
                self._replies.append(self._prompt())
        return []

    def _may_prompt(self) -> bool:
        """Whether the queued text may go out as a prompt now: the session is set up, and no turn runs
        (or the agent queues a prompt into the running turn)."""
        if not self.queued or not self.session_id or self.closed or self.closing or self.setting_up or self.reopening:
            return False
        return self.hooks.steers if self.running else self.turn_over

    # ---- kept by the keeper, taken up by a later daemon (sessions/acp_kept.py) ------------
    def memory(self) -> dict[str, Any] | None:
        return acp_kept.memory(self)

    def recall(self, memory: dict[str, Any], held: set[int]) -> None:
        """A memory never taken (the earlier daemon died before it stored any position, or one the store could not
        keep whole): the agent was sent `initialize` and nothing else that the store does not show."""
        self._held = set(held)
        if acp_kept.taken(memory):
            acp_kept.recall(self, memory, held)
        else:
            self._started_only = True

    def reread(self, raw: bytes, seq: int) -> None:
        """Also what the earlier daemon sent meanwhile unasked; a permission request no gate holds was answered."""
        acp_kept.sent_meanwhile(self, raw)
        super().reread(raw, seq)
        if seq not in self._held:
            self._pending.pop(seq, None)

    # ---- answering ------------------------------------------------------------
    def verdict_line(self, call: ev.ToolCall, verdict: Verdict | None) -> bytes | None:
        pending = self._pending.pop(call.seq, None)
        if pending is None:
            return None
        request_id, options = pending
        if verdict is not None and verdict.action == Action.BLOCK:
            title = call.args.get("title") or call.args.get("command") or call.tool
            self.queued.append(f"Message from the supervisor (loopwarden): your tool call {str(title)[:200]!r} "
                               f"was rejected. {verdict.message or verdict.reason}")
            chosen = choose(options, "reject_once")
        else:
            chosen = choose(options, "allow_once")
        if chosen is None:  # never an *_always option: without a one-off choice, the request is cancelled
            return _answer(request_id, CANCELLED)
        return _answer(request_id, {"outcome": {"outcome": "selected", "optionId": chosen}})

    def inject_line(self, text: str, kind: str, rule: str, model: str | None = None) -> bytes | None:
        if self.closed or rule == "validation":  # a bad line is the agent's, not the model's
            return None
        who = "an operator, through loopwarden" if kind == "operator" else "the supervisor (loopwarden)"
        self.queued.append(f"Message from {who}: {text}")
        if self._may_prompt():
            return self._prompt()
        return None

    def oversized_reply(self, head: bytes, length: int, seq: int, limit: int) -> bytes | None:
        """An over-long request still gets its answer: `cancelled` for a permission, an error otherwise."""
        return _unread_refusal(head, f"the request is {length:,} bytes, over loopwarden's {limit:,}-byte line limit")

    def replies(self, gated: bool) -> list[bytes]:
        """Answers owed now; queued text as the next prompt once the turn is over; and once a turn is over
        with nothing owed either way and no open gate, the end of stdin."""
        out, self._replies = self._replies, []
        if self.closed:
            return out
        if self._may_prompt():
            out.append(self._prompt())
        elif (self.turn_over and not self.running and not gated and not self._pending and not self.queued
              and not self.reopening and not self.setting_up and not self.closing):
            if self.hooks.close_before_exit and self.session_id:
                self.closing = True
                out.append(self._request("session/close", {"sessionId": self.session_id}))
            else:
                self.closed = True
                out.append(CLOSE)
        return out

    def stop_line(self, reason: str, message: str) -> bytes | None:
        if self.closed:
            return None
        self.closed = True
        out = b""
        if self.session_id and self.running:
            out += line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": self.session_id}})
        out += b"".join(_answer(r, CANCELLED) for r, _ in self._pending.values())
        self._pending.clear()
        if self.session_id and self.hooks.close_before_exit and not self.closing:
            out += self._request("session/close", {"sessionId": self.session_id})  # then it exits at stdin's end
        return out or None
