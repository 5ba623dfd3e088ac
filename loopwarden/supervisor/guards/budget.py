"""Token and cost budgets from usage events: a warning at 80%, terminate(budget) at the limit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from .. import kinds, messages
from ..config import Config, Limits
from ..events import Event, Output, ResourceSample, Usage
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, Counter, Guard

WARN_AT: Final = 0.8


class BudgetGuard(Guard):
    name = "budget"
    handles = (Usage, Output, ResourceSample)

    def __init__(self, cfg: Limits) -> None:
        self.cfg = cfg
        self.tokens = 0
        self.cost = 0.0
        self.output_bytes = 0
        self.rss = 0
        self.processes = 0
        self.warned: set[str] = set()

    def configure(self, config: Config) -> None:
        self.cfg = config.limits

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        if type(event) is kinds.OUTPUT:
            self.output_bytes += event.size or len(event.text)
            cap = self.cfg.max_output_bytes
            if cap and self.output_bytes > cap:
                text = messages.budget_terminate("output", f"{self.output_bytes:,} bytes", f"{cap:,} bytes")
                return (terminate(self.name, Termination.BUDGET, text, what="output", used=self.output_bytes,
                                  limit=cap),)
            return NO_VERDICTS
        if type(event) is kinds.RESOURCE_SAMPLE:
            return self._resources(event)
        assert isinstance(event, kinds.USAGE)
        self.tokens += event.input_tokens + event.output_tokens
        self.cost += event.cost_usd or 0.0
        if not self.cfg.max_tokens and not self.cfg.max_cost_usd:
            return NO_VERDICTS  # no budget: nothing to check
        out: list[Verdict] = []
        checks: tuple[tuple[str, float, float, Callable[[float], str]], ...] = (
            ("token", self.tokens, self.cfg.max_tokens, lambda v: f"{v:,.0f} tokens"),
            ("cost", self.cost, self.cfg.max_cost_usd, lambda v: f"${v:.2f}"),
        )
        for what, used, limit, show in checks:
            if not limit:
                continue
            if used >= limit:
                text = messages.budget_terminate(what, show(used), show(limit))
                return (terminate(self.name, Termination.BUDGET, text, what=what, used=used, limit=limit),)
            if used >= WARN_AT * limit and what not in self.warned:
                self.warned.add(what)
                text = messages.budget_warning(what, show(used), show(limit))
                out.append(Verdict(Action.NUDGE, self.name, f"{what} budget at {used / limit:.0%}", message=text,
                                   evidence={"what": what, "used": used, "limit": limit}))
        return out or NO_VERDICTS

    def _resources(self, sample: ResourceSample) -> Sequence[Verdict]:
        self.rss, self.processes = sample.rss, sample.processes
        for what, used, limit in (("memory", sample.rss, self.cfg.max_rss),
                                  ("process", sample.processes, self.cfg.max_processes)):
            if limit and used > limit:
                text = messages.budget_terminate(what, f"{used:,}", f"{limit:,}")
                return (terminate(self.name, Termination.BUDGET, text, what=what, used=used, limit=limit),)
        return NO_VERDICTS

    def counters(self) -> list[Counter]:
        return [Counter("tokens", self.tokens, self.cfg.max_tokens),
                Counter("cost_usd", round(self.cost, 4), self.cfg.max_cost_usd)]
