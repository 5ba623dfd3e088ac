"""Token and cost budgets from usage events: a warning at 80%; at the limit the next tool call waits behind a gate
(limits.budget_action=pause) or the session ends (terminate(budget)). Output, memory and processes terminate."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from .. import kinds, messages
from ..config import Config, Limits
from ..events import Event, Output, ResourceSample, ToolCall, Usage
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, Counter, Guard, Observer

WARN_AT: Final = 0.8
SCOPES: Final = ("session", "day", "project")  # the budgets a session may reach, the session's own first


class Reached(NamedTuple):
    """A budget reached: which (`scope`: session, day, project), of what (cost, token), spent and limit."""

    scope: str
    what: str
    used: float
    limit: float
    project: str | None = None

    def shown(self) -> tuple[str, str]:
        if self.what == "token":
            return f"{self.used:,.0f} tokens", f"{self.limit:,.0f} tokens"
        return f"${self.used:.2f}", f"${self.limit:.2f}"

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"budget": self.scope, "what": self.what, "used": round(self.used, 6),
                               "limit": self.limit}
        if self.project is not None:
            out["project"] = self.project
        return out


class BudgetGuard(Guard):
    name = "budget"
    handles = (Usage, Output, ResourceSample, ToolCall)

    def __init__(self, cfg: Limits) -> None:
        self.cfg = cfg
        self.tokens = 0
        self.cost = 0.0
        self.output_bytes = 0
        self.rss = 0
        self.processes = 0
        self.warned: set[str] = set()
        # the daemon's budgets this session counts against that are reached (day, project): scope -> its figures,
        # given by the runtime (SessionHealth.outside_budgets), since only the daemon sees every session's spend
        self.outside: dict[str, dict[str, Any]] = {}

    def configure(self, config: Config) -> None:
        self.cfg = config.limits

    def hook(self, kind: type[Event]) -> Observer | None:
        if kind is ToolCall:  # a call is judged only while a budget could hold it: most sessions have none
            cfg = self.cfg
            return self._call if self.outside or cfg.max_cost_usd or cfg.max_tokens else None
        return self.observe

    def reached(self) -> Reached | None:
        """The first budget reached (the session's own before the daemon's), or None."""
        cfg = self.cfg
        if cfg.max_cost_usd and self.cost >= cfg.max_cost_usd:
            return Reached("session", "cost", self.cost, cfg.max_cost_usd)
        if cfg.max_tokens and self.tokens >= cfg.max_tokens:
            return Reached("session", "token", self.tokens, cfg.max_tokens)
        for scope in SCOPES:
            found = self.outside.get(scope)
            if found:
                return Reached(scope, "cost", float(found["used"]), float(found["limit"]), found.get("project"))
        return None

    def set_outside(self, reached: Mapping[str, Mapping[str, Any]]) -> None:
        self.outside = {scope: dict(reached[scope]) for scope in SCOPES if scope in reached}

    def _call(self, event: ToolCall, now: float) -> Sequence[Verdict]:
        """Before a call is let through: a budget reached holds it (a gate), or ends the session."""
        found = self.reached()
        if found is None:
            return NO_VERDICTS
        used, limit = found.shown()
        if self.cfg.budget_action == "terminate":
            text = messages.budget_reached_terminate(found.scope, found.what, used, limit, found.project)
            return (terminate(self.name, Termination.BUDGET, text, **found.evidence()),)
        text = messages.budget_gate(found.scope, found.what, used, limit, found.project)
        return (Verdict(Action.GATE, self.name, text, evidence={**found.evidence(), "tool": event.tool}),)

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        if type(event) is kinds.TOOL_CALL:
            return self._call(event, now)
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
        return self._usage(event)

    def _usage(self, event: Usage) -> Sequence[Verdict]:
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
                if self.cfg.budget_action == "pause":
                    return out or NO_VERDICTS  # the next call waits (`_call`): the run stops where it is
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
