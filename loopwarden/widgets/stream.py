"""One compact, styled line per record of a session's stream (events, verdicts, gates, actions, spills)."""

from __future__ import annotations

import time
from typing import Any

import orjson
from rich.style import Style
from rich.text import Text

from .copying import CopyTarget, spilled_text

ARGS_CHARS = 80
TEXT_CHARS = 160

VERDICT_STYLE = {"nudge": "yellow", "block": "bold red", "gate": "bold magenta", "terminate": "bold white on red",
                 "escalate": "bold yellow", "force_next": "cyan", "unblock_authority": "green", "spill": "cyan"}
LINK_STYLE = "underline cyan"


def history_messages(logs: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """A `logs` result as subscription-shaped messages ({kind, data}), oldest first, the newest `limit`."""
    out: list[tuple[float, int, dict[str, Any]]] = []
    for order, row in enumerate(logs.get("events") or []):
        kind = "log" if row.get("kind") == "log" else "event"
        out.append((row.get("ts") or 0.0, order, {"kind": kind, "data": row.get("data") or {}}))
    for kind, rows in (("verdict", logs.get("verdicts")), ("action", logs.get("actions")),
                       ("spill", logs.get("spills"))):
        for order, row in enumerate(rows or []):
            out.append((row.get("ts") or 0.0, order, {"kind": kind, "data": row}))
    out.sort(key=lambda item: (item[0], item[1]))
    return [message for _, _, message in out[-limit:]]


def message_key(message: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a record in both the history and the live feed, to skip the overlap once."""
    data = message.get("data") or {}
    return message.get("kind"), data.get("seq"), data.get("ts"), data.get("action") or data.get("type")


def is_stderr(message: dict[str, Any]) -> bool:
    """A line the agent wrote to its stderr (hidden in the detail by default); loopwarden's own lines are not.
    A plain session's stderr is an `output` event (it counts as activity), any other's a log line."""
    data, kind = message.get("data") or {}, message.get("kind")
    return data.get("stream") == "stderr" and (kind == "log" or (kind == "event" and data.get("type") == "output"))


def copy_target(message: dict[str, Any]) -> CopyTarget:
    """What `y` copies of a record: a call with its arguments, an output whole, a message's text, else the record.

    A spill line copies the spilled output itself (its first MiB), read from its file.
    """
    kind, data = message.get("kind"), message.get("data") or {}
    event = data.get("type") if kind == "event" else None
    if event == "tool_call":
        args = orjson.dumps(data.get("args"), option=orjson.OPT_INDENT_2, default=str).decode()
        return CopyTarget(f"the call to {_cut(str(data.get('tool')), 40)}", f"{data.get('tool')} {args}")
    if event == "tool_result":
        return CopyTarget(f"the output of {_cut(str(data.get('tool') or 'a call'), 40)}", str(data.get("output") or ""))
    if kind == "spill" and data.get("path"):
        return CopyTarget("the spilled output", spilled_text(str(data["path"])))
    if event in _SIMPLE:
        return CopyTarget("the event", str(data.get(_SIMPLE[event][1]) or ""))
    if kind == "log":
        return CopyTarget("the log line", str(data.get("text") or ""))
    return CopyTarget(f"the {kind or 'record'}", orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str).decode())


def render(message: dict[str, Any], spill_id: int | None = None) -> Text | None:
    """The line for one message, or None for records not worth a line (snapshots, resource samples).

    A spill line is a link: clicking it runs the screen's `open_spill(spill_id)` action.
    """
    kind = message.get("kind")
    data = message.get("data") or {}
    if kind == "event":
        body = _event(data)
    elif kind == "verdict":
        body = _verdict(data)
    elif kind == "gate":
        body = _gate(data)
    elif kind == "action":
        body = _action(data)
    elif kind == "spill":
        body = _spill(data, spill_id)
    elif kind == "log":
        stream = str(data.get("stream") or "log")
        body = Text(f"{stream}: {_first_line(data.get('text'))}", style=_log_style(stream, data))
    else:
        return None
    if body is None:
        return None
    stamp = data.get("ts")
    if kind == "gate":  # a gate record has no ts: its moment is when it opened, or was decided
        stamp = data.get("decided_at") or data.get("opened_at")
    prefix = time.strftime("%H:%M:%S ", time.localtime(stamp)) if isinstance(stamp, (int, float)) else " " * 9
    return Text.assemble((prefix, "dim"), body)


# How loopwarden's failure lines begin: a record stored before lines carried a level is red when it is one
_FAILURE_OPENINGS = ("cannot start ", "supervision failed (", "second opinion failed (", "stopped reading the agent's",
                     "recovery.on_loop=rewind could not rewind")


def _log_style(stream: str, data: dict[str, Any]) -> str:
    """loopwarden's own lines stand out, in red only when something failed; the agent's stderr is dim."""
    if stream != "loopwarden":
        return "dim"
    return "red" if data.get("level") == "error" or _old_failure(data) else "italic cyan"


def _old_failure(data: dict[str, Any]) -> bool:
    """A failure line stored with no level (by a daemon before levels): known by how it reads."""
    text = data.get("text")
    if "level" in data or not isinstance(text, str):
        return False
    if text.startswith("spill of "):
        return " failed: " in text
    return text.startswith(_FAILURE_OPENINGS) or "survived SIGKILL" in text


def _event(data: dict[str, Any]) -> Text | None:
    kind = data.get("type")
    if kind == "tool_call":
        return Text.assemble(("▶ ", "bold blue"), (str(data.get("tool")), "bold"), " ", _args(data.get("args")))
    if kind == "tool_result":
        failed = data.get("is_error") or (data.get("exit_code") not in (None, 0))
        status = ("error" + (f" (exit {data.get('exit_code')})" if data.get("exit_code") else ""), "red") \
            if failed else ("ok", "green")
        size = len(data.get("output") or "")
        return Text.assemble(("◀ ", "blue"), (str(data.get("tool") or "result"), ""), " ", status,
                             (f" {_size(size)}", "dim"), (" ", ""), (_first_line(data.get("output"), 60), "dim"))
    if kind == "resources":
        return None
    if kind in _SIMPLE:
        label, field, style = _SIMPLE[kind]
        return Text.assemble((label, f"bold {style}".strip()), (_first_line(data.get(field)), style))
    if kind == "hello":
        return Text(f"hello {data.get('name') or ''}{' (handshake)' if data.get('handshake') else ''}", style="dim")
    if kind == "test_result":
        return Text.assemble(("tests: ", "bold"), (f"{data.get('passed')} passed, {data.get('failed')} failed",
                                                   "red" if data.get("failed") else "green"))
    rest = {k: v for k, v in data.items() if k not in ("type", "ts", "seq")}
    return Text.assemble((f"{kind}: ", "bold"), _cut(orjson.dumps(rest, default=str).decode(), TEXT_CHARS))


_SIMPLE = {  # event type: (label, field shown, style)
    "assistant_message": ("assistant: ", "text", ""), "user_message": ("user: ", "text", "bold"),
    "system_nudge": ("injected: ", "text", "italic"), "done": ("done: ", "summary", "green"),
    "error": ("error: ", "message", "red"), "validation_error": ("invalid: ", "message", "yellow"),
    "invalid_line": ("invalid line: ", "reason", "yellow"), "gate_request": ("asks a human: ", "reason", "magenta"),
    "output": ("", "text", ""), "condensation": ("condensed: ", "text", "dim"),
}


def _verdict(data: dict[str, Any]) -> Text:
    action = str(data.get("action") or "?")
    style = VERDICT_STYLE.get(action, "")
    gate = f" {data['gate_id']}" if data.get("gate_id") else ""
    return Text.assemble(("■ ", style), (f"{action.upper()}{gate}", style), f" {data.get('rule') or ''}: ",
                         (_first_line(data.get("reason")), style if action == "terminate" else ""))


def _gate(data: dict[str, Any]) -> Text:
    status = str(data.get("status") or "?")
    if status == "pending":
        return Text.assemble(("◆ gate ", "bold magenta"), (f"{data.get('id')} open: ", "bold magenta"),
                             _first_line(data.get("reason")))
    who = f" by {data['decided_by']}" if data.get("decided_by") else ""
    note = f": {_first_line(data['note'])}" if data.get("note") else ""
    return Text.assemble(("◆ gate ", "magenta"), (f"{data.get('id')} {status}", "bold magenta"), f"{who}{note}")


def _action(data: dict[str, Any]) -> Text:
    target = f" {data['target']}" if data.get("target") and data.get("action") != "run" else ""
    note = f" “{_first_line(data['note'], 60)}”" if data.get("note") else ""
    return Text.assemble(("⚑ ", "bold cyan"), (f"{data.get('action')}{target}", "bold cyan"), note,
                         (f" → {data.get('outcome')}  ({data.get('client')})", "dim"))


def _spill(data: dict[str, Any], spill_id: int | None) -> Text:
    link = Style.parse(LINK_STYLE)
    if spill_id is not None:
        link += Style.from_meta({"@click": f"screen.open_spill({spill_id})"})
    return Text.assemble(("⤓ ", "cyan"), f"{data.get('tool') or 'output'} spilled {_size(data.get('size') or 0)} → ",
                         (str(data.get("path")), link), (" (o opens)", "dim"))


def _args(args: Any) -> str:
    if isinstance(args, dict):
        parts = [f"{k}={v if isinstance(v, (str, int, float)) else orjson.dumps(v, default=str).decode()}"
                 for k, v in args.items()]
        return _cut(" ".join(parts).replace("\n", "⏎"), ARGS_CHARS)
    return _cut(str(args or ""), ARGS_CHARS)


def _first_line(text: Any, limit: int = TEXT_CHARS) -> str:
    value = str(text or "").strip()
    first = value.split("\n", 1)[0]
    return _cut(first, limit) + (" …" if len(first) < len(value) and len(first) <= limit else "")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(chars: int) -> str:
    return f"{chars:,} chars" if chars < 10_000 else f"{chars / 1000:,.0f}k chars"
