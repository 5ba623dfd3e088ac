"""The store's values: a row's fields turned into what its columns hold, and back.

Every text value, in a column or inside JSON, is capped at `text_cap` characters (not bytes) with a
marker; a JSON document still longer than `json_cap` is replaced by {"truncated", "chars", "preview"};
lone surrogates become "?"; values orjson cannot hold are stored as str(); a value nested past
MAX_RECORD_DEPTH is stored with its deeper parts replaced by a marker. Unknown columns refuse the batch.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Mapping
from typing import Any

import orjson
from sqlite_utils import Database

from ..supervisor.bounds import MAX_RECORD_DEPTH, REPLY_ENVELOPE, cut_marker
from .store_sql import StoreError

APPEND = ("events", "verdicts", "actions", "spills")  # the tables rows are appended to (the others: upserted)
JSON_COLUMNS = {"sessions": ("command", "env_keys", "config", "snapshot", "lost"), "events": ("data",),
                "verdicts": ("evidence",), "gates": ("evidence",), "positions": ("memory",)}
BOOL_COLUMNS = {"sessions": ("handshake",)}
_MARKER = "\n[... truncated by loopwarden: {kept:,} of {total:,} characters kept]"


def clean(text: str, cap: int) -> str:
    """`text` cut to `cap` characters (with a marker), lone surrogates replaced by '?'."""
    if len(text) > cap:
        text = text[:cap] + _MARKER.format(kept=cap, total=len(text))
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _str(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - a value's __str__ may raise anything
        return f"<unprintable {type(value).__name__}>"


def _names(value: Any) -> list[str]:
    """Environment variable names from a mapping, a list of names or one name."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [_str(k) for k in (value.keys() if isinstance(value, Mapping) else value)]


def column_kinds(db: Database, table: str) -> dict[str, str]:
    """Column name -> how values are prepared: text, json, bool or value (as given)."""
    kinds = {}
    for col in db[table].columns:
        if col.name in JSON_COLUMNS.get(table, ()):
            kinds[col.name] = "json"
        elif col.name in BOOL_COLUMNS.get(table, ()):
            kinds[col.name] = "bool"
        else:
            kinds[col.name] = "text" if col.type.upper() == "TEXT" else "value"
    return kinds


def decode(table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """JSON and boolean columns back to values, in place."""
    for row in rows:
        for col in JSON_COLUMNS.get(table, ()):
            if isinstance(row.get(col), str):
                try:
                    row[col] = orjson.loads(row[col])
                except orjson.JSONDecodeError:
                    pass  # not ours: leave the text as it is
        for col in BOOL_COLUMNS.get(table, ()):
            if row.get(col) is not None:
                row[col] = bool(row[col])
    return rows


class RowValues:
    """Prepares rows for the store's tables (`kinds`: table -> column -> how), within its caps."""

    def __init__(self, kinds: dict[str, dict[str, str]], *, text_cap: int, json_cap: int) -> None:
        self.kinds = kinds
        self.text_cap = text_cap
        self.json_cap = json_cap

    def prepare(self, table: str, row: Mapping[str, Any]) -> dict[str, Any]:
        """Check column names and turn values into what the columns hold."""
        if table == "sessions" and ("env" in row or "env_keys" in row):
            row = dict(row)
            names = set(_names(row.pop("env", None))) | set(_names(row.pop("env_keys", None)))
            row["env_keys"] = sorted(names)
        elif table == "gates" and "id" in row:
            row = dict(row)
            gate_id = row.pop("id")
            row.setdefault("gate_id", gate_id)
        kinds = self.kinds[table]
        cap = self.text_cap
        out: dict[str, Any] = {}
        for key, value in row.items():
            kind = kinds.get(key)
            if kind is None or (key == "id" and table in APPEND):
                raise StoreError(f"{table} has no writable column {key!r}")
            if value is None or kind == "value":
                out[key] = value
            elif kind == "text":  # most are short ASCII already: kept as they are (what clean would return)
                fine = type(value) is str and len(value) <= cap and value.isascii()
                out[key] = value if fine else clean(value if isinstance(value, str) else _str(value), cap)
            elif kind == "json":
                out[key] = self.json(value)
            else:  # bool
                out[key] = int(bool(value))
        return out

    def json(self, value: Any) -> str:
        """`value` as JSON text, capped; never raises."""
        try:
            # wrapped in the REPLY_ENVELOPE (4) levels a `logs` reply puts around a row, orjson refuses
            # exactly the values deeper than MAX_RECORD_DEPTH: cheaper than counting every row's brackets
            wrapped = orjson.dumps([[[[value]]]], default=str, option=orjson.OPT_NON_STR_KEYS)
            text: str | None = wrapped[REPLY_ENVELOPE:-REPLY_ENVELOPE].decode()
        except Exception:  # noqa: BLE001 - lone surrogates, ints beyond 64 bits, nesting too deep, a raising __str__
            text = None
        if text is None or len(text) > self.text_cap:
            text = json.dumps(self.plain(value), ensure_ascii=False)
        if len(text) > self.json_cap:
            text = json.dumps({"truncated": True, "chars": len(text),
                               "preview": text[: self.text_cap]}, ensure_ascii=False)
        return text

    def plain(self, value: Any) -> Any:
        """`value` as plain JSON data: strings cleaned and capped, bounded in depth and size."""
        cap = self.text_cap
        budget = self.json_cap  # each node costs at least one character of output

        def walk(v: Any, depth: int) -> Any:
            nonlocal budget
            budget -= 1
            if isinstance(v, str):
                return clean(v, cap)
            if v is None or isinstance(v, (bool, int)):
                return v
            if isinstance(v, float):
                return v if math.isfinite(v) else None
            if budget < 0:
                return "..."
            if depth > MAX_RECORD_DEPTH:
                return cut_marker(MAX_RECORD_DEPTH)
            if isinstance(v, enum.Enum):
                return walk(v.value, depth + 1)
            if dataclasses.is_dataclass(v) and not isinstance(v, type):
                v = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
            if isinstance(v, Mapping):
                return {clean(k if isinstance(k, str) else _str(k), cap): walk(x, depth + 1)
                        for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [walk(x, depth + 1) for x in v]
            return clean(_str(v), cap)

        return walk(value, 1)
