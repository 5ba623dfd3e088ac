"""What the parsers of other agents' JSON-lines streams share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from ..supervisor import events as ev
from ..supervisor import protocol


def invalid(obj: Any, seq: int, reason: str) -> ev.InvalidLine:
    """An InvalidLine for an already-decoded record."""
    try:
        raw = orjson.dumps(obj).decode()
    except (TypeError, orjson.JSONEncodeError):
        raw = repr(obj)[: protocol.PREVIEW_CHARS * 4]
    return ev.InvalidLine(seq=seq, reason=reason, preview=protocol.preview(raw))


class RecordParser:
    """Decodes a line and checks it is a typed record; subclasses map records to Events."""

    def parse_line(self, line: bytes, seq: int) -> list[ev.Event]:
        """One raw line to Events; an undecodable line becomes an InvalidLine."""
        try:
            obj = protocol.load_object(line)
        except protocol.LineRejected as exc:
            return [ev.InvalidLine(seq=seq, reason=str(exc), preview=protocol.preview(line))]
        return self.feed(obj, seq)

    def feed(self, obj: Any, seq: int) -> list[ev.Event]:
        """One decoded record to zero or more Events, all carrying `seq`."""
        if not isinstance(obj, dict):
            return [invalid(obj, seq, f"not a JSON object (got {type(obj).__name__})")]
        kind = obj.get("type")
        if not isinstance(kind, str):
            return [invalid(obj, seq, "missing 'type'")]
        return self.record(kind, obj, seq)

    def record(self, kind: str, obj: dict[str, Any], seq: int) -> list[ev.Event]:
        raise NotImplementedError


def launch_model(words: Iterable[str]) -> str | None:
    """The model an agent's launch names (`-m X`, `--model X` or `--model=X`; the last wins), or None."""
    found = None
    words = list(words)
    for flag, value in zip(words, [*words[1:], None], strict=True):
        if flag in ("-m", "--model") and value is not None:
            found = value
        elif flag.startswith("--model="):
            found = flag[len("--model="):]
    return found if found and len(found) <= 200 else None
