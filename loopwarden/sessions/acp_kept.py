"""A kept ACP agent's adapter state, carried from one daemon to the next (`Adapter.memory`, `recall`, `reread`).

What the stored events do not say: the ACP session, the ids of loopwarden's own requests and what each unanswered
one asked (initialize, session/new, session/prompt ...), the agent's permission requests a gate holds (request id
and the options answered with), the text queued for the next prompt, where the turn stands, and the parser's calls
and message still half read. Every map and list is bounded by count or characters; what comes back from the store
(JSON: int keys as strings, long strings cut, any value of the wrong type) is checked value by value and what
cannot be used is left out, never raised on.

The memory is taken at most every half second, so the last lines an earlier daemon judged are read again after
it (`reread`). Those lines show what that daemon sent meanwhile that no line asked for (a prompt carrying operator
or supervisor text): a turn the agent runs while none was asked for, and an answer to an id never given out.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any

import orjson

from ..supervisor import events as ev
from ..supervisor import protocol

if TYPE_CHECKING:
    from .acp import AcpAdapter, AcpParser

PERMISSION = "session/request_permission"

NAMES = ("session_id", "conversation", "resuming", "resume_state", "failure")  # str or None
FLAGS = ("running", "turn_over", "closed", "prompted", "reopen", "reopening", "closing", "loading", "handshake")
COUNTS = ("prompts_out", "setting_up")
# a memory is a few hundred bytes in practice; these bound it below 16 KiB whatever the agent does
REQUESTS = 16  # our requests unanswered (one to three in practice)
PENDING = 16  # permission requests a gate holds
CALLS = 8  # tool calls seen in updates, neither asked about nor finished
JUDGED = 32  # tool calls asked about, not finished
ARGS_BYTES = 1024  # a remembered call's arguments as JSON, at most (past it, its title alone)
QUEUED_CHARS = 4000  # text queued for the next prompt
MESSAGE_CHARS = 2000  # an assistant message's chunks read so far
NAME_CHARS = 500
ID_MARGIN = 100  # ids skipped after an earlier daemon sent a request this memory never saw
TURN_UPDATES = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"})
CHOSEN = ("allow_once", "reject_once")  # the only option kinds an answer picks (acp.choose)


# ---- taking the memory -----------------------------------------------------------------

def memory(adapter: AcpAdapter) -> dict[str, Any]:
    """The adapter's state as JSON values, a few KiB at most."""
    out: dict[str, Any] = {name: _cut(getattr(adapter, name), NAME_CHARS) for name in NAMES}
    out.update({name: getattr(adapter, name) for name in (*FLAGS, *COUNTS)})
    out["ids"] = adapter._ids
    out["requests"] = {str(i): method for i, method in _newest(adapter._requests, REQUESTS)}
    out["pending"] = {str(seq): [request_id, _options(options)]
                      for seq, (request_id, options) in _newest(adapter._pending, PENDING)}
    out["queued"] = _texts(adapter.queued)
    out["parser"] = _parser_memory(adapter.parser)
    return out


def _newest(table: dict[Any, Any], count: int) -> list[tuple[Any, Any]]:
    """The last `count` entries of an insertion-ordered map, oldest first."""
    return list(islice(reversed(table.items()), count))[::-1]


def _cut(value: Any, limit: int) -> Any:
    return value[:limit] if isinstance(value, str) else value


def _options(options: Any) -> list[dict[str, str]]:
    """The first option of each kind an answer may pick: all `choose` reads of them."""
    out: list[dict[str, str]] = []
    for option in options if isinstance(options, list) else []:
        if (isinstance(option, dict) and option.get("kind") in CHOSEN and isinstance(option.get("optionId"), str)
                and all(o["kind"] != option["kind"] for o in out)):
            out.append({"optionId": option["optionId"][:NAME_CHARS], "kind": option["kind"]})
    return out


def _texts(texts: list[str]) -> list[str]:
    """Queued texts, in order, up to QUEUED_CHARS in all (the last one kept cut)."""
    out, room = [], QUEUED_CHARS
    for text in texts:
        if room <= 0:
            break
        out.append(text[:room])
        room -= len(out[-1])
    return out


def _parser_memory(parser: AcpParser) -> dict[str, Any]:
    calls = {call_id: [call.seq, call.tool, _args(call.args)] for call_id, call in _newest(parser._calls, CALLS)}
    return {"turns": parser.turns, "judged": [call_id for call_id, _ in _newest(parser._judged, JUDGED)],
            "calls": calls, "message": "".join(parser._chunks)[:MESSAGE_CHARS], "model": parser.model,
            "cost": [parser.cost_total, parser.cost_billed]}


def _args(args: dict[str, Any]) -> dict[str, Any]:
    try:
        if len(orjson.dumps(args)) <= ARGS_BYTES:
            return args
    except (TypeError, orjson.JSONEncodeError):
        pass
    title = args.get("title")
    return {"title": title[:NAME_CHARS] if isinstance(title, str) else ""}


# ---- recalling it ------------------------------------------------------------------------

def taken(memory: dict[str, Any]) -> bool:
    """Whether `memory` is one `memory()` took (not nothing, nor a document the store replaced as too large)."""
    return "ids" in memory


def recall(adapter: AcpAdapter, memory: dict[str, Any], held: set[int]) -> None:
    """The adapter as `memory` says it was; of its permission requests only those `held` still wait."""
    for name in NAMES:
        setattr(adapter, name, _text(memory.get(name)))
    for name in FLAGS:
        if isinstance(memory.get(name), bool):
            setattr(adapter, name, memory[name])
    for name in COUNTS:
        setattr(adapter, name, _count(memory.get(name)))
    adapter._requests = {key: method for key, method in _entries(memory.get("requests"))
                         if key is not None and isinstance(method, str)}
    ids = _int(memory.get("ids"))
    last = max(adapter._requests, default=0)
    adapter._ids = max(ids, last) if ids is not None and ids >= 0 else last + ID_MARGIN
    adapter._pending = {seq: entry for seq, entry in
                        ((seq, _permission(value)) for seq, value in _entries(memory.get("pending")))
                        if seq in held and entry is not None}
    queued = memory.get("queued")
    adapter.queued = [text for text in queued if isinstance(text, str)] if isinstance(queued, list) else []
    parser = memory.get("parser")
    _recall_parser(adapter.parser, parser if isinstance(parser, dict) else {})


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(value: Any) -> int:
    number = _int(value)
    return number if number is not None and number > 0 else 0


def _key(key: Any) -> int | None:
    """A map key read back from JSON (a string) as the int it was."""
    if isinstance(key, str) and 0 < len(key) <= 18:
        try:
            return int(key)
        except ValueError:
            return None
    return _int(key)


def _entries(value: Any) -> list[tuple[int | None, Any]]:
    """A remembered map's entries by int key, in key order (unreadable keys as None, first)."""
    entries = [(_key(key), item) for key, item in value.items()] if isinstance(value, dict) else []
    return sorted(entries, key=lambda entry: -1 if entry[0] is None else entry[0])


def _permission(value: Any) -> tuple[Any, Any] | None:
    """(request id, options) of a remembered permission request, or None. Options that cannot be read leave
    none to choose: the request is then answered `cancelled`."""
    if not isinstance(value, list) or len(value) != 2:
        return None
    request_id, options = value
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        return None
    return request_id, options if isinstance(options, list) else None


def _recall_parser(parser: AcpParser, memory: dict[str, Any]) -> None:
    parser.turns = _count(memory.get("turns"))
    model = memory.get("model")
    parser.model = model if isinstance(model, str) and 0 < len(model) <= 200 else None
    cost = memory.get("cost")
    if isinstance(cost, list) and len(cost) == 2 and all(isinstance(c, (int, float, type(None))) for c in cost):
        parser.cost_total = None if cost[0] is None else float(cost[0])
        parser.cost_billed = float(cost[1] or 0.0)
    judged = memory.get("judged")
    parser._judged = dict.fromkeys(j for j in judged if isinstance(j, str) and j) if isinstance(judged, list) else {}
    calls = memory.get("calls")
    parser._calls = {}
    for call_id, value in calls.items() if isinstance(calls, dict) else ():
        if isinstance(value, list) and len(value) == 3:
            seq, tool, args = value
            if _int(seq) is not None and isinstance(tool, str) and isinstance(args, dict):
                parser._calls[call_id] = ev.ToolCall(seq=seq, tool=tool, args=args, call_id=call_id)
    message = _text(memory.get("message"))
    parser._chunks = [message] if message else []
    parser._chunk_chars = len(message) if message else 0


# ---- lines read again ----------------------------------------------------------------------

def sent_meanwhile(adapter: AcpAdapter, raw: bytes) -> None:
    """What an agent's line read again shows the earlier daemon sent after the memory was taken, with no line
    asking for it: a prompt (operator or supervisor text) when the agent works on a turn none was asked for.
    The ids it gave out meanwhile are not known: the next ones skip past them. (An answer to such a prompt, its id
    unknown, is known by its `stopReason`: AcpAdapter._response.)"""
    try:
        obj = protocol.load_object(raw)
    except protocol.LineRejected:
        return
    request_id = _int(obj.get("id"))
    method = obj.get("method")
    if method is None and request_id is not None:
        adapter._ids = max(adapter._ids, request_id)  # seen by the agent: never given out again
        return
    params = obj.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    working = (method == "session/update" and kind in TURN_UPDATES) or (method == PERMISSION and "id" in obj)
    if working and not adapter.running and adapter.session_id and not (adapter.loading or adapter.closed):
        adapter.running, adapter.turn_over, adapter.queued = True, False, []
        adapter.prompts_out = max(adapter.prompts_out, 1)
        adapter._ids += ID_MARGIN
