"""Model prices in USD per million tokens, and usage turned into dollars.

The table holds list prices as shipped with this version of loopwarden (standard tier, short prompts, no batch
discount); a provider's price change, a negotiated rate or a model the table does not know is one `prices.models`
entry in the config ("MODEL=IN,OUT[,CACHED[,CACHE_WRITE]]", see `loopwarden config keys`). A model id matches
the longest entry it starts with, whole dash-separated parts only (so "gpt-5" prices "gpt-5-2025-08-07" but never
"gpt-5.1"), and not when the next part names a newer version or a sibling model ("claude-opus-5" never prices
"claude-opus-5-6", "gemini-3.8-flash" never "gemini-3.8-flash-lite"), case-insensitively, a provider's prefix
("anthropic/", "models/", "openrouter/openai/", "us.anthropic.") left out. A model the table does not know has no
price: its usage is counted in tokens, its cost is unknown, never $0. Where a provider charges more past a prompt
length (Claude Haiku 5.5 past 100k tokens, GPT-5.5 past 272k, Gemini Pro past 200k), the table has the base rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Final, NamedTuple


class Price(NamedTuple):
    """USD per million tokens: uncached input, output, input read from a cache, input written to a cache."""

    input: float
    output: float
    cache_read: float
    cache_write: float


def _p(input: float, output: float, cache_read: float | None = None, cache_write: float | None = None) -> Price:
    """A row: a cache price not given is the input price (no discount, no surcharge)."""
    return Price(input, output, input if cache_read is None else cache_read,
                 input if cache_write is None else cache_write)


# Anthropic: a cache read costs 0.1x input, a (5-minute) cache write 1.25x, except where a row says otherwise (Claude
# Opus 5.5 and Sonnet 5.5 read at 0.05x, Fable and Mythos 5.1 at 0.025x). Claude 4.0's ids are listed whole, and
# a newer minor version never matches an older row ("claude-opus-5-6" is not "claude-opus-5"), so that a later
# model this table does not know is unknown, not priced as an older one. List prices checked 2026-12-06.
_ANTHROPIC: Final = {
    "claude-fable-5-1": _p(10, 50, 0.25, 12.50),
    "claude-mythos-5-1": _p(10, 50, 0.25, 12.50),
    "claude-fable-5": _p(10, 50, 1, 12.50),
    "claude-mythos-5": _p(10, 50, 1, 12.50),
    "claude-opus-5-5": _p(4, 20, 0.20, 5),
    "claude-opus-5": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-8": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-7": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-6": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-5": _p(5, 25, 0.50, 6.25),
    "claude-opus-4-1": _p(15, 75, 1.50, 18.75),
    "claude-opus-4-0": _p(15, 75, 1.50, 18.75),
    "claude-opus-4-20250514": _p(15, 75, 1.50, 18.75),
    "claude-sonnet-5-5": _p(2, 10, 0.10, 2.50),
    "claude-sonnet-5": _p(2, 10, 0.20, 2.50),
    "claude-sonnet-4-6": _p(3, 15, 0.30, 3.75),
    "claude-sonnet-4-5": _p(3, 15, 0.30, 3.75),
    "claude-sonnet-4-0": _p(3, 15, 0.30, 3.75),
    "claude-sonnet-4-20250514": _p(3, 15, 0.30, 3.75),
    "claude-haiku-5-5": _p(0.10, 0.50, 0.01, 0.125),  # prompts up to 100k tokens; longer ones cost 5x
    "claude-haiku-4-5": _p(1, 5, 0.10, 1.25),
    "claude-3-7-sonnet": _p(3, 15, 0.30, 3.75),
    "claude-3-5-sonnet": _p(3, 15, 0.30, 3.75),
    "claude-3-5-haiku": _p(0.80, 4, 0.08, 1.00),
    "claude-3-opus": _p(15, 75, 1.50, 18.75),
    "claude-3-haiku": _p(0.25, 1.25, 0.03, 0.30),
}
# OpenAI: cached input at its own price; writing the cache costs nothing beyond the input. GPT-5.4 and 5.5 cost more
# past 272k input tokens.
_OPENAI: Final = {
    "gpt-5.5": _p(5, 30, 0.50),
    "gpt-5.5-pro": _p(30, 180),
    "gpt-5.4": _p(2.50, 15, 0.25),
    "gpt-5.4-mini": _p(0.75, 4.50, 0.075),
    "gpt-5.4-nano": _p(0.20, 1.25, 0.02),
    "gpt-5.3-codex": _p(1.75, 14, 0.175),
    "gpt-5.2": _p(1.75, 14, 0.175),
    "gpt-5.2-codex": _p(1.75, 14, 0.175),
    "gpt-5": _p(1.25, 10, 0.125),
    "gpt-5-codex": _p(1.25, 10, 0.125),
    "gpt-5-chat-latest": _p(1.25, 10, 0.125),
    "gpt-5-mini": _p(0.25, 2, 0.025),
    "gpt-5-nano": _p(0.05, 0.40, 0.005),
    "gpt-5-pro": _p(15, 120),
    "gpt-5.1": _p(1.25, 10, 0.125),
    "gpt-5.1-codex": _p(1.25, 10, 0.125),
    "gpt-5.1-codex-max": _p(1.25, 10, 0.125),
    "gpt-5.1-codex-mini": _p(0.25, 2, 0.025),
    "gpt-5.1-chat-latest": _p(1.25, 10, 0.125),
    "gpt-4.1": _p(2, 8, 0.50),
    "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "gpt-4o": _p(2.50, 10, 1.25),
    "gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "o3": _p(2, 8, 0.50),
    "o3-mini": _p(1.10, 4.40, 0.55),
    "o4-mini": _p(1.10, 4.40, 0.275),
    "codex-mini-latest": _p(1.50, 6, 0.375),
}
# Google: prompts up to 200k tokens (longer ones cost more on the Pro models); cache storage per hour is not a token
# price. Gemini 3.8 Flash is at its price through 2026-12-31 ($1.50 in, $7.50 out from 2027-01-01).
_GOOGLE: Final = {
    "gemini-3.8-flash": _p(0.75, 3.75, 0.075),
    "gemini-3.7-flash": _p(0.75, 3.75, 0.075),
    "gemini-3.6-flash": _p(0.75, 3.75, 0.075),
    "gemini-3.5-flash": _p(1.50, 9, 0.15),
    "gemini-3.5-flash-lite": _p(0.30, 2.50, 0.03),
    "gemini-3.1-pro-preview": _p(2, 12, 0.20),
    "gemini-3-pro-preview": _p(2, 12, 0.20),
    "gemini-2.5-pro": _p(1.25, 10, 0.125),
    "gemini-2.5-flash": _p(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": _p(0.10, 0.40, 0.01),
    "gemini-2.0-flash": _p(0.10, 0.40, 0.025),
    "gemini-2.0-flash-lite": _p(0.075, 0.30),
}
SHIPPED: Final[Mapping[str, Price]] = {**_ANTHROPIC, **_OPENAI, **_GOOGLE}

_BOUNDARY: Final = frozenset("-@:[")  # what may follow a matched prefix: a date, a version, Bedrock's ":0", "[1m]"
# A part after a matched prefix that names another model: a sibling, or, after a version number, another bare
# number of one or two digits (a minor version, not a date).
_SIBLINGS: Final = frozenset({"lite", "mini", "nano", "pro", "max", "spark"})
_KNOWN_KEPT: Final = 256  # model ids looked up, remembered per table


class PriceError(ValueError):
    """A price entry that cannot be read; the message says which and why."""


def model_key(model: str) -> str:
    """A model id as the table is keyed: lower case, a provider's prefix left out."""
    name = model.strip().lower().rpartition("/")[2]
    at = name.find("anthropic.")  # Bedrock: anthropic.claude-..., us.anthropic.claude-...
    return name[at + len("anthropic."):] if at >= 0 else name


class PriceTable:
    """The shipped prices with the config's entries added or replacing rows; `price(model)` by longest prefix."""

    def __init__(self, overrides: Mapping[str, Price] | None = None) -> None:
        self.rows: dict[str, Price] = {**SHIPPED, **{model_key(k): v for k, v in (overrides or {}).items()}}
        self._known: dict[str, Price | None] = {}

    def price(self, model: str | None) -> Price | None:
        """The row for `model`, or None when the table does not know it."""
        if not model:
            return None
        found = self._known.get(model, _MISSING)
        if found is _MISSING:
            found = self._match(model_key(model))
            if len(self._known) >= _KNOWN_KEPT:
                self._known.clear()
            self._known[model] = found
        return found

    def _match(self, key: str) -> Price | None:
        best = ""
        for prefix in self.rows:
            if len(prefix) > len(best) and key.startswith(prefix) and _same_model(key, len(prefix)):
                best = prefix
        return self.rows[best] if best else None

    def cost(self, model: str | None, input_tokens: int, output_tokens: int, cache_read: int = 0,
             cache_write: int = 0) -> float | None:
        """Dollars for one usage; `input_tokens` includes the cached ones. None for an unknown model."""
        price = self.price(model)
        if price is None:
            return None
        fresh = max(input_tokens - cache_read - cache_write, 0)
        return (fresh * price.input + cache_read * price.cache_read + cache_write * price.cache_write
                + output_tokens * price.output) / 1e6


def _same_model(key: str, end: int) -> bool:
    """Whether `key`, past a matched prefix ending at `end`, is still that prefix's model: nothing more, or a date,
    a snapshot, a provider's suffix; not a sibling ("-lite", "-pro") nor a newer minor version ("-6" after
    "claude-opus-5")."""
    if end == len(key):
        return True
    if key[end] not in _BOUNDARY:
        return False
    if key[end] != "-":
        return True
    part = key[end + 1:].split("-", 1)[0]
    minor = part.isdigit() and len(part) <= 2 and key[end - 1].isdigit()
    return part not in _SIBLINGS and not minor


_MISSING: Final = Price(-1, -1, -1, -1)
SHIPPED_TABLE: Final = PriceTable()


def parse_entry(entry: str) -> tuple[str, Price]:
    """'MODEL=IN,OUT[,CACHED[,CACHE_WRITE]]' (USD per million tokens) as (model, price), or PriceError."""
    model, sep, numbers = entry.partition("=")
    parts = [p.strip() for p in numbers.split(",")]
    if not sep or not model.strip() or not 2 <= len(parts) <= 4:
        raise PriceError(f"{entry!r} is not MODEL=IN,OUT[,CACHED[,CACHE_WRITE]] in USD per million tokens, "
                         "e.g. gpt-5=1.25,10,0.125")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise PriceError(f"{entry!r}: the prices must be numbers, e.g. gpt-5=1.25,10,0.125") from None
    if not all(0 <= v < math.inf for v in values):
        raise PriceError(f"{entry!r}: a price must be a number >= 0")
    return model.strip(), _p(*values)


def table_of(entries: Iterable[str]) -> PriceTable:
    """The shipped table with `entries` (parse_entry's form) added or replacing rows."""
    entries = tuple(entries)
    if not entries:
        return SHIPPED_TABLE
    return PriceTable(dict(parse_entry(e) for e in entries))
