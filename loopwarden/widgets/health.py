"""A session's health at a glance: state, runtime, the last verdict and why, each counter as a bar."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ..runtime.ending import pod_words
from ..supervisor.config import format_duration
from ..supervisor.cost import quota_words, show_cost, show_source
from ..supervisor.messages import AWAITING_HUMAN
from ..supervisor.verdicts import FINAL_STATES
from .session_table import STATE_STYLE, ended_text
from .stream import VERDICT_STYLE




def level_style(ratio: float) -> str:
    """Green, then yellow from 60 % of a limit, red from 90 %, bold red at it."""
    return "bold red" if ratio >= 1 else "red" if ratio >= 0.9 else "yellow" if ratio >= 0.6 else "green"


def counter_bars(snap: dict[str, Any], now: float) -> list[tuple[str, float, float]]:
    """(name, value, limit) of every limited counter, the closest to its limit first."""
    counters = dict(snap.get("counters") or {})
    if snap.get("state") not in FINAL_STATES and snap.get("started_at") and "runtime" in counters:
        value, limit = counters["runtime"]
        counters["runtime"] = [max(value, now - snap["started_at"]), limit]  # a quiet session publishes nothing
    bars = [(name, float(v), float(limit)) for name, (v, limit) in counters.items() if limit]
    return sorted(bars, key=lambda bar: (-bar[1] / bar[2], bar[0]))


def health_view(snap: dict[str, Any] | None, now: float) -> RenderableType:
    """The panel's content for one snapshot (None: not known yet)."""
    if not snap:
        return Text("waiting for the session's state…", style="dim")
    state = str(snap.get("state") or "?")
    top = Table.grid(padding=(0, 1))
    top.add_column(style="dim", no_wrap=True)
    top.add_column()
    ended = ended_text(snap)
    if ended.plain.startswith(state):  # "exited 0", "exited": the words say the state already
        top.add_row("state", Text(ended.plain, style=STATE_STYLE.get(state, "")))
    else:
        top.add_row("state", Text.assemble((state, STATE_STYLE.get(state, "")), " (" if ended else "", ended,
                                           ")" if ended else ""))
    limit = snap.get("max_runtime") or 0
    elapsed = snap.get("runtime") or 0
    if state not in FINAL_STATES and snap.get("started_at"):
        elapsed = max(elapsed, now - snap["started_at"])
    top.add_row("runtime", format_duration(elapsed) + (f" / {format_duration(limit)}" if limit else ""))
    if pod_words(snap):  # a session on a cluster: its pod, node and image
        top.add_row("pod", Text(pod_words(snap), overflow="fold"))
    if snap.get("pending_gates"):
        top.add_row("gates", Text(", ".join(snap["pending_gates"]) + " waiting for a human", style="bold magenta"))
    verdict = snap.get("last_verdict")
    if verdict:
        action = str(verdict.get("action"))
        why = str(verdict.get("reason") or "")
        # a gate (or an escalation to a human) no longer pending: approved, denied or expired
        closed = action in ("gate", "escalate") and bool(verdict.get("gate_id")) and not snap.get("pending_gates")
        if closed:  # its text still asks for a decision that was made
            why = why.removesuffix(AWAITING_HUMAN).rstrip()
        top.add_row("last", Text.assemble((action.upper(), VERDICT_STYLE.get(action, "")), f" {verdict.get('rule')}",
                                          (" (gate closed)", "dim") if closed else ""))
        top.add_row("why", Text(why, overflow="fold"))
    rss = snap.get("rss") or 0
    top.add_row("load", f"cpu {snap.get('cpu_percent') or 0:.0f}%  mem {rss / (1 << 20):.0f}M  "
                        f"procs {snap.get('processes') or 0}  calls {snap.get('tool_calls') or 0}")
    for name, words in cost_rows(snap):
        top.add_row(name, Text(words, overflow="fold"))
    bars = Table.grid(padding=(0, 1), expand=True)
    bars.add_column(no_wrap=True)
    bars.add_column(ratio=1)
    bars.add_column(justify="right", no_wrap=True)
    for name, value, lim in counter_bars(snap, now):
        style = level_style(value / lim)
        bar = ProgressBar(total=lim, completed=min(value, lim), complete_style=style, finished_style=style)
        shown = f"{format_duration(value)}/{format_duration(lim)}" if name in ("runtime", "silence") \
            else f"{value:g}/{lim:g}"
        bars.add_row(name, bar, Text(shown, style=style if value / lim >= 0.6 else ""))
    extras = [f"{name} {value:g}" for name, (value, lim) in (snap.get("counters") or {}).items() if not lim and value]
    parts: list[RenderableType] = [top, Text(""), bars]
    if extras:
        parts.append(Text("  ".join(extras), style="dim"))
    return Group(*parts)


def cost_rows(snap: dict[str, Any]) -> list[tuple[str, str]]:
    """The session's cost (with its tokens, models and where the dollars came from) and its agent's subscription
    quota, one row each; none before any usage."""
    rows = []
    cost = snap.get("cost")
    if isinstance(cost, dict):
        cached = (cost.get("cache_read_tokens") or 0) + (cost.get("cache_write_tokens") or 0)
        tokens = f"{cost.get('input_tokens') or 0:,} in" + (f" ({cached:,} cached)" if cached else "") \
            + f", {cost.get('output_tokens') or 0:,} out"
        models = ", ".join(cost.get("models") or []) or "model not reported"
        rows.append(("cost", f"{show_cost(cost)} {show_source(cost)} · {tokens} · {models}"))
    rows.extend(("quota", quota_words(w)) for w in (snap.get("quota") or {}).get("windows") or [])
    return rows


# the setting behind each counter's limit, to type in the limits dialog (tests/console/test_actions.py checks them)
COUNTER_KEYS = {
    "runtime": "limits.max_runtime", "silence": "limits.stall_timeout", "iterations": "limits.max_iterations",
    "tokens": "limits.max_tokens", "cost_usd": "limits.max_cost_usd",
    "identical_calls": "repetition.max_identical_calls", "blocks": "repetition.max_blocks",
    "same_error": "repetition.max_same_error", "alternation": "repetition.alternation_window",
    "monologue": "repetition.max_monologue", "validation": "validation.max_consecutive",
    "failures": "failures.max_consecutive", "loop": "loop.gate_after", "attempts": "attempts.max_attempts",
    "failed_iterations": "escalation.failures_per_model", "polling": "repetition.progress_gate_after",
    "condensation": "condensation.max_in_a_row", "rereads": "rereads.max_reads", "chanting": "chanting.repeats",
    "reflections": "reflections.max_rounds",
}


def _amount(name: str, value: float) -> str:
    return format_duration(value) if name in ("runtime", "silence") else f"{value:g}"


def limits_view(snap: dict[str, Any], now: float) -> RenderableType:
    """A session's counters against their limits, each with the setting that moves it, for the limits dialog."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(style="cyan", no_wrap=True)
    counters = dict(snap.get("counters") or {})
    counters.setdefault("runtime", [snap.get("runtime") or 0, snap.get("max_runtime") or 0])
    limited = counter_bars({**snap, "counters": counters}, now)  # the closest to its limit first
    unlimited = [(name, float(value), 0.0) for name, (value, limit) in sorted(counters.items()) if not limit]
    for name, value, limit in limited + unlimited:
        grid.add_row(name, f"{_amount(name, value)} of {_amount(name, limit)}" if limit
                     else f"{_amount(name, value)}, no limit", COUNTER_KEYS.get(name, ""))
    preset = f"preset {snap['preset']}; " if snap.get("preset") else ""
    return Group(grid, Text(f"{preset}'loopwarden config keys' lists every setting", style="dim"))


class HealthPanel(Static):
    """Draws `health_view` for the snapshot it is given; the screen calls `show` on its timer."""

    def show(self, snap: dict[str, Any] | None, now: float | None = None) -> None:
        self.update(health_view(snap, time.time() if now is None else now))
