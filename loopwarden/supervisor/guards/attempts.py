"""Task attempts: completed-task revisit, blocked spin, no-progress repeat."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .. import kinds, messages
from ..config import Attempts, Config
from ..events import Attempt, Event
from ..verdicts import Action, Verdict
from .base import NO_VERDICTS, Counter, Guard

_MAX_TASKS: Final = 256
_MAX_RECORDS: Final = 64


@dataclass(slots=True, frozen=True)
class AttemptRecord:
    at: float
    seq: int
    status: str
    blockers: tuple[str, ...]
    work: tuple[str, ...]
    agent: str | None

    def evidence(self) -> dict[str, object]:
        return {"seq": self.seq, "at": self.at, "status": self.status, "blockers": list(self.blockers),
                "work": list(self.work), "agent": self.agent}


def _evidence(task: str, records: deque[AttemptRecord]) -> dict[str, object]:
    """The task's attempts, built only when a verdict fires (before its records are cleared)."""
    return {"task": task, "attempts": [r.evidence() for r in records]}


class AttemptsGuard(Guard):
    """Only attempts inside the window count; each recovery clears the task's history."""

    name = "attempts"
    handles = (Attempt,)

    def __init__(self, cfg: Attempts) -> None:
        self.cfg = cfg
        self.tasks: OrderedDict[str, deque[AttemptRecord]] = OrderedDict()
        self.granted: dict[str, tuple[str, ...]] = {}

    def configure(self, config: Config) -> None:
        self.cfg = config.attempts

    def observe(self, event: Event, now: float) -> Sequence[Verdict]:
        assert isinstance(event, kinds.ATTEMPT)
        task = event.task or "default"
        records = self.tasks.setdefault(task, deque(maxlen=_MAX_RECORDS))
        self.tasks.move_to_end(task)
        if len(self.tasks) > _MAX_TASKS:
            dropped, _ = self.tasks.popitem(last=False)
            self.granted.pop(dropped, None)
        while records and now - records[0].at > self.cfg.window:
            records.popleft()
        records.append(AttemptRecord(now, event.seq, event.status, tuple(sorted(event.blockers)),
                                     tuple(event.work), event.agent))
        return self._detect(task, records)

    def _detect(self, task: str, records: deque[AttemptRecord]) -> Sequence[Verdict]:
        n = self.cfg.max_attempts
        last = records[-1].status  # each pattern needs the newest attempt's status: a cheap pre-check
        recent = list(records)[-n:] if n and len(records) >= n and last in ("done", "blocked") else []
        if recent and all(r.status == "done" for r in recent):
            evidence = _evidence(task, records)
            records.clear()
            return (Verdict(Action.FORCE_NEXT, "completed_task_revisit",
                            f"task {task} attempted {n}x after it was done",
                            message=messages.force_next_done(task, n), evidence=evidence),)
        if recent and all(r.status == "blocked" for r in recent) \
                and len({r.blockers for r in recent}) == 1:
            blockers = recent[-1].blockers
            evidence = _evidence(task, records)
            records.clear()
            if self.cfg.auto_unblock and self.granted.get(task) != blockers:
                self.granted[task] = blockers
                return (Verdict(Action.UNBLOCK_AUTHORITY, "blocked_task_spin",
                                f"task {task} blocked {n}x by the same blockers",
                                message=messages.unblock_authority(task, list(blockers), n), evidence=evidence),)
            why = ("No progress despite unblock authority" if task in self.granted
                   else "Blocked on the same blockers and auto-unblock is off")
            total = 2 * n if task in self.granted else n
            return (Verdict(Action.ESCALATE, "blocked_task_spin", f"task {task}: {why.lower()}",
                            message=messages.escalate_human(task, total, why), target="human",
                            evidence=evidence),)
        m = self.cfg.force_next_after
        last_m = list(records)[-m:] if m and len(records) >= m and last in ("pending", "in_progress") else []
        if last_m and all(r.status in ("pending", "in_progress") for r in last_m) \
                and len({r.work for r in last_m}) == 1:
            evidence = _evidence(task, records)
            records.clear()
            return (Verdict(Action.FORCE_NEXT, "no_progress_repeat",
                            f"task {task}: the same work in {m} attempts",
                            message=messages.force_next_no_progress(task, m), evidence=evidence),)
        return NO_VERDICTS

    def human_reset(self, counter: str | None = None) -> None:
        if counter in (None, "attempts"):
            self.tasks.clear()
            self.granted.clear()

    def counters(self) -> list[Counter]:
        worst = max((len(r) for r in self.tasks.values()), default=0)
        return [Counter("attempts", worst, self.cfg.max_attempts)]
