"""Iterations: stuck patterns, escalation up the agent's model ladder (ladders.py), then a human; max iterations."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from .. import kinds, messages
from ..config import Config, Escalation, Limits
from ..ladders import ladder_for
from ..events import Event, Iteration
from ..verdicts import Action, Termination, Verdict, terminate
from .base import NO_VERDICTS, Counter, Guard


class IterationsGuard(Guard):
    name = "iterations"
    handles = (Iteration,)

    def __init__(self, limits: Limits, cfg: Escalation) -> None:
        self.max_iterations = limits.max_iterations
        self.cfg = cfg
        self.models = list(ladder_for(cfg.models, (), None))  # `for_agent` put the agent's own in `models`
        self.model_index = 0
        self.count = 0
        self.consecutive_failures = 0
        self.recent: deque[Iteration] = deque(maxlen=3)

    @property
    def model(self) -> str:
        return self.models[self.model_index] if self.model_index < len(self.models) else "human"

    def configure(self, config: Config) -> None:
        self.max_iterations = config.limits.max_iterations
        self.cfg = config.escalation  # its ladder (`models`) was copied at the start and stays

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        assert isinstance(event, kinds.ITERATION)
        self.count += 1
        failed = event.status == "fail"
        self.consecutive_failures = self.consecutive_failures + 1 if failed else 0
        self.recent.append(event)
        limit = self.max_iterations
        if limit and (self.count > limit or (self.count == limit and failed)):
            return (terminate(self.name, Termination.MAX_ITERATIONS, messages.max_iterations(limit),
                              iterations=self.count, last_status=event.status),)
        pattern = self._stuck_pattern()
        if pattern:
            self.recent.clear()
            return (self._escalate(messages.stuck_iterations(pattern), "stuck_loop", pattern),)
        at_top = self.model_index >= len(self.models) - 1
        threshold = self.cfg.failures_at_top if at_top else self.cfg.failures_per_model
        if threshold and self.consecutive_failures >= threshold:
            why = f"{self.consecutive_failures} consecutive failed iterations on {self.model}"
            return (self._escalate(why, "model_escalation", why),)
        return NO_VERDICTS

    def _stuck_pattern(self) -> str | None:
        if len(self.recent) < 3 or not all(it.status == "fail" for it in self.recent):
            return None
        first = self.recent[0]
        if first.files_modified and all(it.files_modified == first.files_modified for it in self.recent):
            return f"the same files modified 3 times with failures ({', '.join(first.files_modified)[:120]})"
        if first.failing_tests and all(it.failing_tests == first.failing_tests for it in self.recent):
            return f"the same tests failing 3 times ({', '.join(first.failing_tests)[:120]})"
        if first.error and all(it.error == first.error for it in self.recent):
            return f"the same error 3 times ({messages.clip(first.error, 120)})"
        return None

    def _escalate(self, why: str, rule: str, reason: str) -> Verdict:
        failures = self.consecutive_failures
        self.consecutive_failures = 0
        current = self.model
        evidence = {"from": current, "failures": failures, "iterations": self.count}
        if self.model_index < len(self.models) - 1:
            self.model_index += 1
            text = messages.escalate_model(current, self.model, why)
            return Verdict(Action.ESCALATE, rule, f"{reason}: {current} -> {self.model}", message=text,
                           target=self.model, evidence=evidence)
        self.model_index = len(self.models)
        text = messages.escalate_human(f"(iteration {self.count})", self.count, why)
        return Verdict(Action.ESCALATE, rule, f"{reason}: {current} -> human", message=text, target="human",
                       evidence=evidence)

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "iterations", "escalation"):
            self.consecutive_failures = 0
            self.recent.clear()
            if self.model_index >= len(self.models):
                self.model_index = len(self.models) - 1  # a human answered; the top model carries on

    def counters(self) -> list[Counter]:
        return [Counter("iterations", self.count, self.max_iterations),
                Counter("failed_iterations", self.consecutive_failures, self.cfg.failures_per_model)]
