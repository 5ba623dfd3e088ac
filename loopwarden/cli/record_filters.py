"""The filters of `logs` and `audit` as a person types them: times as durations ago or ISO timestamps."""

from __future__ import annotations

import time
from datetime import datetime

from ..runtime.store_filter import RecordFilter
from .common import Fail

TIME_HELP = "a duration ago (10m, 2h, 1d) or a time (2026-12-07T14:30, 2026-12-07 14:30:00+00:00)"


def parse_when(text: str, option: str, now: float | None = None) -> float:
    """Seconds since the epoch for `--since 10m` (ten minutes ago) or `--since 2026-12-07T14:30` (local time
    unless it names its zone); anything else is a one-line error."""
    from ..supervisor.config import parse_duration  # here: `ls` and its kin never load the config's parser

    try:
        return (time.time() if now is None else now) - parse_duration(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise Fail(f"{option} {text!r}: not a duration or a time; use {TIME_HELP}") from None


def record_filter(since: str | None, until: str | None, grep: str | None, rule: str | None) -> RecordFilter:
    """The filter `logs` asks the daemon for; a range that ends before it starts is refused."""
    now = time.time()
    start = parse_when(since, "--since", now) if since else None
    end = parse_when(until, "--until", now) if until else None
    if start is not None and end is not None and end < start:
        raise Fail(f"--until {until!r} is before --since {since!r}: nothing could match")
    return RecordFilter(since=start, until=end, grep=grep or None, rule=rule or None)
