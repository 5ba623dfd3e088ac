"""Newline-delimited JSON read back: what an adapter writes to its agent, what a command prints."""

from __future__ import annotations

import json
from typing import Any


def json_lines(data: bytes | str | None) -> list[Any]:
    """The JSON value of each line (blank lines skipped)."""
    return [json.loads(x) for x in (data or b"").splitlines() if x]
