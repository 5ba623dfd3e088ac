"""Adapter: Claude Code `--output-format stream-json --verbose` records to Events."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from itertools import islice
from typing import Any

import orjson

from ..supervisor import events as ev
from ..supervisor import protocol
from ..supervisor.bounds import TOO_DEEP, cut_deep, depth_exceeds
from ..supervisor.cost import PROVISIONAL, TURN
from .recorded import RecordParser, invalid

MAP_LIMIT = 4096  # call ids and message ids remembered per stream
ID_CHARS = 200  # the longest id (or tool name) a kept session's memory carries; a longer one is left out of it
MEMORY_CALLS = 32  # calls still waiting for their results a kept session's memory carries (the latest)


def _remember(table: dict[str, Any], key: str, value: Any, limit: int = MAP_LIMIT) -> None:
    """Store key -> value and drop the oldest entries beyond `limit`."""
    table.pop(key, None)
    table[key] = value
    while len(table) > limit:
        del table[next(iter(table))]


def latest(table: dict[str, Any], count: int) -> list[str]:
    """The last `count` keys of an insertion-ordered table, oldest first, those over ID_CHARS left out."""
    keys = list(islice(reversed(table), count))
    keys.reverse()
    return [key for key in keys if len(key) <= ID_CHARS]


def recalled_ids(value: Any, count: int) -> dict[str, None]:
    """Ids read back from a stored memory (`latest`'s list): its strings, the last `count` of them."""
    items = value[-count:] if isinstance(value, list) else []
    return {item: None for item in items if isinstance(item, str) and len(item) <= ID_CHARS}


def recalled_count(value: Any) -> int:
    """A counter read back from a stored memory; anything but a whole number >= 0 counts as 0."""
    return value if type(value) is int and value >= 0 else 0


def _int(value: Any) -> int:
    """A token count as an int; anything that is not a number counts as 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value)


def _num(value: Any) -> float | None:
    """A number as a float, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def epoch(stamp: Any) -> float | None:
    """An ISO-8601 timestamp as epoch seconds (naive means UTC), or None."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def block_text(content: Any) -> str:
    """Tool-result content as text; images become a short placeholder, never base64."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return orjson.dumps(content).decode()
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif not isinstance(block, dict):
            continue
        elif block.get("type") == "text":
            parts.append(str(block.get("text") or ""))
        elif block.get("type") == "image":
            source = block.get("source")
            source = source if isinstance(source, dict) else {}
            data = source.get("data")
            size = f", {len(data)} bytes {source.get('type') or 'base64'}" if isinstance(data, str) else ""
            parts.append(f"[image: {source.get('media_type') or 'unknown'}{size}]")
        else:
            parts.append(f"[{block.get('type') or 'block'}]")
    return "\n".join(parts)


class ClaudeCodeParser(RecordParser):
    """Turns one Claude Code stream-json stream into Events; keep one instance per stream."""

    def __init__(self) -> None:
        self._tools: dict[str, str] = {}  # tool_use id -> tool name
        self._spoken: dict[str, None] = {}  # message ids that already gave an AssistantMessage
        self._billed: dict[str, None] = {}  # message ids whose usage was billed (provisionally, until the result)
        self._seen_assistant = False
        self._results = 0
        self._cost_total = 0.0
        self.model: str | None = None  # the main agent's, from the init record and its messages
        self.quota: dict[str, Any] | None = None  # the subscription's windows, from rate_limit_event

    def memory(self, calls: Iterable[str]) -> dict[str, Any]:
        """What later records depend on, as JSON values of a few KiB (`Adapter.memory`): the tool names of `calls`
        (those whose results may still come), the message that spoke last, whether the model spoke, the turns
        counted and the cost so far."""
        names = self._tools
        tools = {key: names[key] for key in calls if len(names.get(key) or "") in range(1, ID_CHARS + 1)}
        return {"tools": tools, "spoken": latest(self._spoken, 4), "billed": latest(self._billed, 4),
                "seen_assistant": self._seen_assistant,
                "results": self._results, "cost_total": self._cost_total, "model": self.model}

    def spent_before(self, usd: float) -> None:
        """The conversation's cost before this stream: a resumed Claude Code's total_cost_usd counts it too."""
        self._cost_total = max(usd, 0.0)

    def recall(self, memory: Mapping[str, Any]) -> None:
        """`memory()` read back from the store; a value of the wrong type reads as nothing known."""
        tools = memory.get("tools")
        tools = tools if isinstance(tools, dict) else {}
        self._tools = {key: name for key, name in list(tools.items())[-MEMORY_CALLS:]
                       if isinstance(name, str) and len(key) <= ID_CHARS}
        self._spoken = recalled_ids(memory.get("spoken"), 4)
        self._billed = recalled_ids(memory.get("billed"), 4)
        self._seen_assistant = memory.get("seen_assistant") is True
        self._results = recalled_count(memory.get("results"))
        cost = _num(memory.get("cost_total"))
        self._cost_total = cost if cost is not None and cost >= 0 else 0.0
        self.model = _model(memory.get("model"))

    def record(self, kind: str, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        """One typed record to zero or more Events, all carrying `seq`."""
        handler = {"assistant": self._assistant, "user": self._user, "result": self._result}.get(kind)
        if handler is None:  # system, rate_limit_event, stream_event, control_*, unknown
            if kind == "system" and obj.get("subtype") == "init":
                self.model = _model(obj.get("model")) or self.model
            elif kind == "rate_limit_event":
                self.quota = quota_of(obj.get("rate_limit_info"), self.quota)
            return []
        return handler(obj, seq, epoch(obj.get("timestamp")))

    def _assistant(self, obj: dict[str, Any], seq: int, ts: float | None) -> list[ev.Event]:
        message = obj.get("message")
        if not isinstance(message, dict):
            return [invalid(obj, seq, "assistant: 'message' must be an object")]
        self._seen_assistant = True
        agent = _agent(obj)
        if agent is None:
            self.model = _model(message.get("model")) or self.model
        msg_id = message.get("id") if isinstance(message.get("id"), str) else None
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        out: list[ev.Event] = []
        if msg_id is not None and msg_id not in self._billed and isinstance(message.get("usage"), dict):
            # every record of one API message repeats its usage: it is billed once
            _remember(self._billed, msg_id, None)
            out.append(self._usage(message["usage"], seq, ts, _model(message.get("model")) or self.model,
                                   agent=agent, cost=None, source=PROVISIONAL))
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                name = block.get("name")
                tool = name if isinstance(name, str) and name else "unknown"
                args = block.get("input")
                call_id = block.get("id") if isinstance(block.get("id"), str) else None
                if call_id:
                    _remember(self._tools, call_id, tool)
                out.append(ev.ToolCall(
                    seq=seq, ts=ts, agent=agent, tool=tool, call_id=call_id,
                    args=args if isinstance(args, dict) else {"input": args},
                ))
            elif block.get("type") == "text":
                text = block.get("text")
                if not isinstance(text, str) or not text.strip():
                    continue
                if msg_id is not None:
                    if msg_id in self._spoken:
                        continue  # one AssistantMessage per API message
                    _remember(self._spoken, msg_id, None)
                out.append(ev.AssistantMessage(seq=seq, ts=ts, agent=agent, text=text))
        error = obj.get("error")
        if isinstance(error, str) and error:  # API failure surfaced on an assistant line
            message = f"assistant error: {error}"
            out.append(ev.Error(seq=seq, ts=ts, agent=agent, message=message, error_type=error))
        return out

    def _user(self, obj: dict[str, Any], seq: int, ts: float | None) -> list[ev.Event]:
        message = obj.get("message")
        if not isinstance(message, dict):
            return [invalid(obj, seq, "user: 'message' must be an object")]
        agent = _agent(obj)
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        out: list[ev.Event] = []
        texts: list[str] = []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                call_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
                out.append(ev.ToolResult(
                    seq=seq, ts=ts, agent=agent, call_id=call_id,
                    tool=self._tools.get(call_id) if call_id else None,
                    output=block_text(block.get("content")),
                    is_error=bool(block.get("is_error") or False),
                ))
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
        if texts and (obj.get("isReplay") is True or not self._seen_assistant):
            out.insert(0, ev.UserMessage(seq=seq, ts=ts, agent=agent, text="\n".join(texts)))
        return out

    def _result(self, obj: dict[str, Any], seq: int, ts: float | None) -> list[ev.Event]:
        self._results += 1
        usage = obj.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        total = _num(obj.get("total_cost_usd"))
        if total is None:
            total = _num(obj.get("cost_usd"))  # legacy field name
        spent = None
        if total is not None:
            # Totals are cumulative per stream; a drop means a reset, so start again from 0.
            spent = total - self._cost_total if total >= self._cost_total else total
            self._cost_total = total
        subtype = obj.get("subtype")
        is_error = bool(obj.get("is_error") or False)
        # A missing subtype (the hand-made claude-code-action fixture) counts as success.
        passed = subtype in ("success", None) and not is_error
        errors = obj.get("errors")
        error = None
        if isinstance(errors, list) and errors:
            error = str(errors[0])
        elif is_error and isinstance(obj.get("result"), str):
            error = obj["result"]
        elif not passed and isinstance(subtype, str):
            error = subtype
        # the turn's figure is settled by the engine against what its calls were billed (supervisor/cost.py)
        return [
            self._usage(usage, seq, ts, self._result_model(obj), agent=None, cost=spent, source=TURN),
            ev.Iteration(seq=seq, ts=ts, n=self._results, status="pass" if passed else "fail", error=error),
        ]

    @staticmethod
    def _usage(usage: dict[str, Any], seq: int, ts: float | None, model: str | None, *, agent: str | None,
               cost: float | None, source: str) -> ev.Usage:
        """A Messages API `usage` object as a Usage (input_tokens counts the cache's too; no count below 0)."""
        read = max(_int(usage.get("cache_read_input_tokens")), 0)
        write = max(_int(usage.get("cache_creation_input_tokens")), 0)
        fresh = max(_int(usage.get("input_tokens")), 0)
        return ev.Usage(seq=seq, ts=ts, agent=agent, input_tokens=fresh + read + write,
                        output_tokens=max(_int(usage.get("output_tokens")), 0), cost_usd=cost, model=model,
                        cache_read_tokens=read, cache_write_tokens=write, cost_source=source)


    def _result_model(self, obj: dict[str, Any]) -> str | None:
        """The model a result's usage is of: the one model of its `modelUsage`, else the main agent's."""
        by_model = obj.get("modelUsage")
        if isinstance(by_model, dict) and len(by_model) == 1:
            return _model(next(iter(by_model))) or self.model
        return self.model


_WINDOW_MINUTES = {"five_hour": 300, "seven_day": 10080, "seven_day_opus": 10080, "seven_day_sonnet": 10080,
                   "seven_day_overage_included": 10080}


def quota_of(info: Any, before: dict[str, Any] | None) -> dict[str, Any] | None:
    """A rate_limit_event's `rate_limit_info` (its windows' utilization as a fraction, resetsAt in epoch seconds;
    `unifiedWindows` per window, else the one `rateLimitType`) merged into the quota kept so far."""
    if not isinstance(info, dict):
        return before
    windows = {w["name"]: w for w in (before or {}).get("windows") or []}
    unified = info.get("unifiedWindows")
    given = dict(unified) if isinstance(unified, dict) else {}
    if not given and isinstance(info.get("rateLimitType"), str):
        given[info["rateLimitType"]] = info
    for name, window in given.items():
        used = _num(window.get("utilization")) if isinstance(window, dict) else None
        if isinstance(name, str) and name in _WINDOW_MINUTES and used is not None:
            status = window.get("status")
            windows[name] = {"name": name, "used_percent": round(used * 100, 1),
                             "window_minutes": _WINDOW_MINUTES[name], "resets_at": _num(window.get("resetsAt")),
                             "status": status if isinstance(status, str) else None}
    return {"plan": None, "windows": list(windows.values())} if windows else before


def _model(value: Any) -> str | None:
    """A model id as an agent names it, or None (not a string, empty, absurdly long)."""
    return value if isinstance(value, str) and 0 < len(value) <= 200 else None


def _agent(obj: dict[str, Any]) -> str | None:
    """The Task call id a sub-agent line belongs to, or None for the main agent."""
    parent = obj.get("parent_tool_use_id")
    return parent if isinstance(parent, str) and parent else None


def parse_array(data: bytes) -> list[ev.Event]:
    """Parse a top-level JSON array of stream-json records (seq = 1-based index)."""
    records = load_array(data)
    if isinstance(records, ev.InvalidLine):
        return [records]
    parser = ClaudeCodeParser()
    return [e for seq, record in enumerate(records, 1) for e in array_record(parser, record, seq)]


def load_array(data: bytes) -> list[Any] | ev.InvalidLine:
    """The records of a top-level JSON array, or why `data` is not one."""
    try:
        records = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        reason = TOO_DEEP if "depth limit" in str(exc) else f"not valid JSON ({str(exc).split(':', 1)[0]})"
        return ev.InvalidLine(seq=1, reason=reason, preview=protocol.preview(data))
    if not isinstance(records, list):
        return ev.InvalidLine(seq=1, reason="not a JSON array", preview=protocol.preview(data))
    return records


def array_record(parser: ClaudeCodeParser, record: Any, seq: int) -> list[ev.Event]:
    """One record of the array; each is bounded as a line of the stream would be."""
    if depth_exceeds(record):
        return [invalid(cut_deep(record), seq, TOO_DEEP)]
    return parser.feed(record, seq)


def array_events(data: bytes) -> Iterator[list[ev.Event]]:
    """Each record's events of a recording that is one JSON array (claude-code-action's fixtures); an array that
    cannot be read is one record whose event says why."""
    records = load_array(data)
    if isinstance(records, ev.InvalidLine):
        yield [records]
        return
    parser = ClaudeCodeParser()
    for seq, record in enumerate(records, 1):
        yield array_record(parser, record, seq)
