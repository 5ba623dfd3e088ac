"""Adapter: OpenAI Codex `codex exec --json` records to Events."""

from __future__ import annotations

from typing import Any


from ..supervisor import events as ev
from .recorded import RecordParser, invalid

MAP_LIMIT = 4096  # started item ids remembered per stream
TRANSIENT_PREFIXES = ("Reconnecting",)  # stream-level `error`s that codex retries itself


def _int(value: Any) -> int | None:
    """An int, or None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    """A non-empty string, or None."""
    return value if isinstance(value, str) and value else None


def _mcp_output(item: dict[str, Any]) -> tuple[str, bool]:
    """An mcp_tool_call's result text and whether it failed."""
    error = item.get("error")
    if isinstance(error, dict) and error.get("message") is not None:
        return str(error["message"]), True
    result = item.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    blocks = content if isinstance(content, list) else []
    texts = [str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(texts), item.get("status") == "failed"


class CodexParser(RecordParser):
    """Turns one `codex exec --json` stream into Events; keep one instance per stream."""

    def __init__(self) -> None:
        self._started: dict[str, None] = {}  # item ids whose ToolCall was already emitted
        self._turns = 0
        self.model: str | None = None  # set by who knows it (the stream does not say)

    def record(self, kind: str, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        """One typed record to zero or more Events, all carrying `seq`."""
        if kind in ("item.started", "item.completed"):
            item = obj.get("item")
            if not isinstance(item, dict):
                return [invalid(obj, seq, f"{kind}: 'item' must be an object")]
            return self._item(item, seq, done=kind == "item.completed")
        if kind == "turn.completed":
            # OpenAI's input_tokens already include cached_input_tokens (a subset), so
            # input_tokens alone is the whole prompt; adding the cached count would double it.
            usage = obj.get("usage")
            usage = usage if isinstance(usage, dict) else {}
            self._turns += 1
            return [
                ev.Usage(
                    seq=seq,
                    input_tokens=_int(usage.get("input_tokens")) or 0,
                    output_tokens=_int(usage.get("output_tokens")) or 0,
                    cache_read_tokens=_int(usage.get("cached_input_tokens")),
                    cache_write_tokens=_int(usage.get("cache_write_input_tokens")),
                    model=self.model,  # the stream never names it: the launch's --model, when known
                ),
                ev.Iteration(seq=seq, n=self._turns, status="pass"),
            ]
        if kind == "turn.failed":
            error = obj.get("error")
            message = str(error.get("message") or "turn failed") if isinstance(error, dict) else "turn failed"
            self._turns += 1
            return [
                ev.Error(seq=seq, message=message),
                ev.Iteration(seq=seq, n=self._turns, status="fail", error=message),
            ]
        if kind == "error":
            message = str(obj.get("message") or "error")
            if message.startswith(TRANSIENT_PREFIXES):
                return []
            return [ev.Error(seq=seq, message=message)]
        return []  # thread.started, turn.started, item.updated, item.plan.delta, unknown

    def _item(self, item: dict[str, Any], seq: int, done: bool) -> list[ev.Event]:
        item_id = _str(item.get("id"))
        itype = item.get("type")
        if itype == "agent_message":
            text = item.get("text")
            return [ev.AssistantMessage(seq=seq, text=text)] if done and isinstance(text, str) else []
        if itype == "command_execution":
            tool, args = "shell", {"command": item.get("command")}
        elif itype == "mcp_tool_call":
            server, name = _str(item.get("server")), _str(item.get("tool")) or "unknown"
            arguments = item.get("arguments")
            tool = f"{server}.{name}" if server else name
            if isinstance(arguments, dict):
                args = arguments
            else:
                args = {} if arguments is None else {"arguments": arguments}
        elif itype == "file_change":
            tool, args = "apply_patch", {"changes": item.get("changes")}
        elif itype == "web_search":
            # Mapped like Claude's WebSearch so repeated searches count as repeated calls.
            tool, args = "web_search", {"query": item.get("query")}
        else:
            return []  # reasoning, plan, todo_list, collab_tool_call, error items, unknown
        out: list[ev.Event] = []
        seen = item_id is not None and item_id in self._started
        if not seen:  # a completed item never seen as started still gets its ToolCall first
            out.append(ev.ToolCall(seq=seq, tool=tool, args=args, call_id=item_id))
            if not done and item_id is not None:
                self._started[item_id] = None
                while len(self._started) > MAP_LIMIT:
                    del self._started[next(iter(self._started))]
        if done:
            if item_id is not None:
                self._started.pop(item_id, None)
            out.append(self._result(item, itype, tool, item_id, seq))
        return out

    def _result(
        self, item: dict[str, Any], itype: Any, tool: str, item_id: str | None, seq: int,
    ) -> ev.ToolResult:
        status = item.get("status")
        if itype == "command_execution":
            exit_code = _int(item.get("exit_code"))
            output = item.get("aggregated_output")
            failed = status in ("failed", "declined") or exit_code not in (None, 0)
            return ev.ToolResult(
                seq=seq, tool=tool, call_id=item_id, output=output if isinstance(output, str) else "",
                exit_code=exit_code, is_error=failed,
            )
        if itype == "mcp_tool_call":
            output, failed = _mcp_output(item)
            return ev.ToolResult(seq=seq, tool=tool, call_id=item_id, output=output, is_error=failed)
        if itype == "file_change":
            changes = item.get("changes")
            changes = changes if isinstance(changes, list) else []
            lines = [f"{c.get('kind')} {c.get('path')}" for c in changes if isinstance(c, dict)]
            output = "\n".join(lines)
            return ev.ToolResult(seq=seq, tool=tool, call_id=item_id, output=output, is_error=status == "failed")
        return ev.ToolResult(seq=seq, tool=tool, call_id=item_id, output="", is_error=status == "failed")
