"""A native line read the typed way: its event and the record it was decoded from, on the per-line path of the
native adapter, live and in replay. Compiled with the engine (setup.py); typed.py, which defines the records,
cannot be."""

from __future__ import annotations

from typing import Any, Final

from . import events as ev
from .typed import EVENT_OF, REFUSED, decode_record

_DECODE: Final = decode_record  # final names: compiled, each is a C static, not a lookup in this module's dict
_EVENT_OF: Final = EVENT_OF


def typed_record(line: bytes | str, seq: int) -> tuple[ev.Event, Any] | None:
    """A plainly valid line's event and the record it was built from (`typed.stored_json` encodes it), else None:
    the careful path (protocol.py) decides and explains."""
    try:
        record = _DECODE(line)
        event = _EVENT_OF[type(record)](record, seq)
    except REFUSED:
        return None
    return None if event is None else (event, record)


def typed_event(line: bytes | str, seq: int) -> ev.Event | None:
    """The line's event when it is plainly valid, else None (the careful path decides and explains)."""
    if type(line) is str and not line.isascii():
        return None  # a str may hold lone surrogates, which orjson names
    read = typed_record(line, seq)
    return None if read is None else read[0]
