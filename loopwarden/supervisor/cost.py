"""A session's usage in tokens and dollars: each usage event priced before the guards see it, and added up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # `ls` and the console import this module for show_cost alone
    from .events import Usage
    from .prices import PriceTable

AGENT: Final = "agent"  # the agent's own figure (Claude Code's total_cost_usd, a native cost_usd): it wins
TABLE: Final = "table"  # priced by the engine from prices.py and the config's prices.models
# Claude Code tells its dollars only at a turn's end: each API call's tokens are priced from the table as they come
# (PROVISIONAL), and the turn's own figure (TURN) then bills only what those did not, so a budget holds mid-turn and
# the agent's total still wins. A settled TURN usage is kept as AGENT, which (stored, read back) starts a new turn.
PROVISIONAL: Final = "provisional"
TURN: Final = "turn"
_MODELS_KEPT: Final = 8


class SessionCost:
    """Prices each usage that has no dollars of its own (`take`), and keeps the session's sums."""

    def __init__(self, table: PriceTable) -> None:
        self.table = table
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0
        self.cost_usd = 0.0
        self.unpriced = 0  # usage events with tokens and no dollars: the model is unknown
        self.sources: set[str] = set()
        self.model: str | None = None  # the last one named
        self.models: dict[str, None] = {}
        self._turn: tuple[float, int, int] = (0.0, 0, 0)  # dollars, input and output tokens billed provisionally
        # in the turn so far

    def take(self, usage: Usage) -> None:
        """Fill `usage.cost_usd` from the table when the agent gave none (a stored event keeps what it was given
        then), settle a turn's figure against what its calls were billed, and add the usage up."""
        _not_negative(usage)
        if usage.cost_source == TURN:
            self._settle(usage)
        cost = usage.cost_usd
        model = usage.model
        read, write = usage.cache_read_tokens, usage.cache_write_tokens
        if cost is not None:
            if usage.cost_source is None:
                usage.cost_source = AGENT
        elif model is not None and usage.cost_source in (None, PROVISIONAL):
            cost = self.table.cost(model, usage.input_tokens, usage.output_tokens, read or 0, write or 0)
            if cost is not None:
                usage.cost_usd, usage.cost_source = cost, usage.cost_source or TABLE
        if usage.cost_source == PROVISIONAL:
            usd, tokens_in, tokens_out = self._turn
            self._turn = (usd + (cost or 0.0), tokens_in + usage.input_tokens, tokens_out + usage.output_tokens)
        elif usage.cost_source == AGENT:
            self._turn = (0.0, 0, 0)
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        if read:
            self.cache_read_tokens += read
        if write:
            self.cache_write_tokens += write
        if cost is not None:
            self.cost_usd += cost
            self.sources.add(TABLE if usage.cost_source == PROVISIONAL else usage.cost_source or AGENT)
        elif usage.input_tokens or usage.output_tokens:
            self.unpriced += 1
        if model:
            self.model = model
            if model not in self.models and len(self.models) < _MODELS_KEPT:
                self.models[model] = None

    def _settle(self, usage: Usage) -> None:
        """A turn's own figures, less what its calls were billed already (never below 0), kept as the agent's."""
        cost, tokens_in, tokens_out = self._turn
        usage.input_tokens = max(usage.input_tokens - tokens_in, 0)
        usage.output_tokens = max(usage.output_tokens - tokens_out, 0)
        if tokens_in:  # the cache's share is the provisional events' to tell
            usage.cache_read_tokens = usage.cache_write_tokens = None
        if usage.cost_usd is not None:
            usage.cost_usd = max(usage.cost_usd - cost, 0.0)
            usage.cost_source = AGENT
        else:  # no dollars reported: what the table gave stands
            usage.cost_source = None
            self._turn = (0.0, 0, 0)

    def view(self) -> dict[str, Any] | None:
        """What `status`, `ls` and the console show; None before any usage."""
        if not (self.input_tokens or self.output_tokens or self.sources or self.unpriced):
            return None
        return {"cost_usd": round(self.cost_usd, 6) if self.sources else None, "unpriced": self.unpriced,
                "source": "+".join(sorted(self.sources)) or None, "model": self.model, "models": list(self.models),
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens}


def _not_negative(usage: Usage) -> None:
    """No usage lowers a spend: a negative count or cost (a bad adapter reading) counts as 0."""
    if usage.input_tokens < 0:
        usage.input_tokens = 0
    if usage.output_tokens < 0:
        usage.output_tokens = 0
    if usage.cost_usd is not None and usage.cost_usd < 0:
        usage.cost_usd = 0.0
    if usage.cache_read_tokens is not None and usage.cache_read_tokens < 0:
        usage.cache_read_tokens = 0
    if usage.cache_write_tokens is not None and usage.cache_write_tokens < 0:
        usage.cache_write_tokens = 0


def show_cost(view: dict[str, Any] | None) -> str:
    """A session's cost in a few characters: $0.0123, ? (tokens of an unknown model), $1.20+? (some of each),
    or an empty string before any usage."""
    if not view:
        return ""
    cost = view.get("cost_usd")
    unknown = "?" if view.get("unpriced") else ""
    if cost is None:
        return unknown or ""
    shown = f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
    return shown + ("+" + unknown if unknown else "")


def show_source(view: dict[str, Any]) -> str:
    """Where the dollars came from, in words."""
    source = view.get("source") or ""
    words = {AGENT: "agent-reported", TABLE: "priced from the table"}
    said = " and ".join(words.get(s, s) for s in source.split("+") if s)
    if view.get("unpriced"):
        said = (said + "; " if said else "") + f"{view['unpriced']} usage report(s) of a model with no price"
    return said or "no cost reported"


def quota_words(window: dict[str, Any]) -> str:
    """One window of a subscription quota (as the adapters keep it: name, used_percent, window_minutes,
    resets_at in epoch seconds), in words: "primary: 42% used of a 5h window, resets 2026-12-06 23:10 UTC"."""
    import time  # formatting a given instant, not reading the clock

    used = window.get("used_percent")
    minutes = window.get("window_minutes")
    said = f"{used:g}% used" if isinstance(used, (int, float)) else "use not reported"
    if isinstance(minutes, int) and minutes > 0:
        span = f"{minutes // 1440}d" if minutes % 1440 == 0 else f"{minutes // 60}h" if minutes % 60 == 0 \
            else f"{minutes}m"
        said += f" of a {span} window"
    resets = window.get("resets_at")
    if isinstance(resets, (int, float)) and 0 < resets < 1e11:
        said += ", resets " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(resets))
    if window.get("status") == "rejected":
        said += " (limit reached)"
    return f"{window.get('name') or 'quota'}: {said}"
