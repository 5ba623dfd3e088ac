"""Evidence in words, for people: one fact per line, the way the console's gates queue and alerts show it.

A gate's or verdict's evidence is a dict; a list of records in it (the failures that opened a loop gate)
becomes numbered lines of `key=value` facts, timestamps as local clock time. Every value is one line,
clipped; the caller makes it visible (the console through its feed, alerts through `visible`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from .messages import clip


def fact(key: str, value: Any, limit: int = 160) -> str:
    """One evidence value on one line; timestamps (`ts`, `*_at`) as local clock time."""
    if (key == "ts" or key.endswith("_at")) and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return time.strftime("%H:%M:%S", time.localtime(value))
        except (OverflowError, OSError, ValueError):  # a timestamp no clock can show
            pass
    return clip(value if isinstance(value, str) else repr(value), limit)


def records(value: Any) -> bool:
    """Whether `value` is a list of records (shown one numbered line each)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def record_line(record: dict[str, Any]) -> str:
    return ", ".join(f"{k}={fact(k, v)}" for k, v in record.items() if v is not None)


def evidence_lines(evidence: Any, skip: Iterable[str] = (), limit: int = 400) -> Iterator[str]:
    """The evidence, a line per fact: `key: value`, or `key:` then `  1. k=v, k=v` per record."""
    items = evidence.items() if isinstance(evidence, dict) else [("evidence", evidence)]
    skipped = frozenset(skip)
    for key, value in items:
        if key in skipped or value in (None, "", [], {}):
            continue
        if records(value):
            yield f"{key}:"
            for i, item in enumerate(value, 1):
                yield f"  {i:>2}. {record_line(item)}"
        else:
            yield f"{key}: {fact(str(key), value, limit)}"
