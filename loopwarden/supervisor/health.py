"""SessionHealth: runs every guard over a session's events and owns its state and gates."""

from __future__ import annotations

from collections import Counter as Tally
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Final

from . import kinds, messages
from .config import Config
from .counters import RESETTABLE as RESETTABLE  # re-exported: its home before it moved out for the command line
from .cost import SessionCost
from .control import NOTHING, ToolControl
from .events import Event, InvalidLine, ToolCall, ToolResult
from .gates import Gate, GateBook
from .roster import GuardRoster, Observer
from .guards.base import BlockLedger, Counter
from .guards.budget import BudgetGuard
from .guards.loop_counter import Similarity, lexical_similarity
from .guards.repetition import result_matches
from .guards.runtime import RuntimeGuard
from .guards.validation import ValidationGuard
from .prices import table_of
from .signature import ArgsTooDeep, call_signature
from .verdicts import Action, Termination, Verdict, terminate

RUNNING: Final = "running"
GATED: Final = "gated"
DONE: Final = "done"
TERMINATED: Final = "terminated"
_DECIDED_GATES_KEPT: Final = 200
OPERATOR_RULE: Final = "operator"  # the rule of verdicts carrying an operator's own decision (guidance, grant, kill)
_VALIDATION_KEPT: Final = 1000
_EXEMPT_CALLS_KEPT: Final = 16  # calls some rules skip whose results have not come yet
# what `_note` looks at (a usage is priced there, before the guards count its dollars)
_NOTED: Final = frozenset({kinds.INVALID_LINE, kinds.VALIDATION_ERROR, kinds.DONE, kinds.USAGE})


class SessionHealth:
    """The functional core of one session: `observe(event, now)` and `tick(now)` return verdicts."""

    def __init__(self, config: Config, *, started_at: float | None = None,
                 similarity: Similarity = lexical_similarity) -> None:
        self.config = config
        self.ledger = BlockLedger(config.repetition.max_blocks)
        self.runtime = RuntimeGuard(config.limits, started_at)
        self._validation = ValidationGuard(config.validation)
        self.by_type: dict[str, int] = {}
        self.cost = SessionCost(table_of(config.prices.models))
        self.budget = BudgetGuard(config.limits)
        self.roster = GuardRoster(config, self.ledger, self.runtime, self._validation, self.budget, self.by_type,
                                  similarity)
        self.guards = self.roster.guards
        self._observers: dict[type[Event], tuple[Observer, ...]] = {}
        self.control = ToolControl(config)
        self._route()
        self._exempt_calls: deque[tuple[ToolCall, frozenset[str]]] = deque(maxlen=_EXEMPT_CALLS_KEPT)
        self.waiting_call: ToolCall | None = None  # a waiting command in flight: silence is not a stall
        self._last_tool: str | None = None
        self.gates = GateBook()
        self._gate_timeout = config.gates.timeout
        self.state = RUNNING
        self.termination: Verdict | None = None
        self.by_rule: Tally[str] = Tally()
        self.by_action: Tally[str] = Tally()  # what was done to the agent (nudged, blocked...), counted as it is
        self.validation_failures: deque[tuple[int, str]] = deque(maxlen=_VALIDATION_KEPT)
        self.last_verdict: Verdict | None = None

    # ---- the event path -------------------------------------------------
    def observe(self, event: Event, now: float) -> list[Verdict]:
        """Judge one event; after termination every event is ignored."""
        if self.state == TERMINATED:
            return []
        runtime = self.runtime
        if runtime.quiet_until(now) and not self._gate_timeout:
            runtime.now = now
            out: list[Verdict] = []
        else:
            out = self._tick(now, event.seq)
            if self.state == TERMINATED:
                return out
        kind = type(event)
        # one test of the type for the common kinds (a call, a result), in the order the checks were made
        if type(event) is kinds.TOOL_CALL:
            try:
                event.sig = call_signature(event.tool, event.args)
            except (ArgsTooDeep, TypeError) as exc:
                event = InvalidLine(seq=event.seq, ts=event.ts, task=event.task, agent=event.agent,
                                    reason=f"tool_call: {exc}")
                kind = InvalidLine
        if kind is not kinds.RESOURCE_SAMPLE:
            by_type = self.by_type
            name = event.kind
            by_type[name] = by_type.get(name, 0) + 1
        if type(event) is kinds.TOOL_CALL:
            exempt, tuned = self._take_call(event, now)
        elif type(event) is kinds.TOOL_RESULT:
            exempt, tuned = self._take_result(event, now)
        else:
            exempt, tuned = NOTHING, None
            if kind in _NOTED:
                self._note(event)
        found: list[Verdict] | None = None  # made only when a guard gives a verdict (rare)
        if exempt or tuned is not None:
            found = self.roster.observe_some(event, kind, exempt, tuned, self.config, now)
        else:  # the common case: every guard of the type, by its bound method
            at: Any = now  # boxed once for the hooks (Python calls), not once per hook (compiled, `now` is a C double)
            for guard_observe in self._observers[kind]:
                verdicts = guard_observe(event, at)
                if verdicts:
                    found = [*found, *verdicts] if found else list(verdicts)
        if kind is kinds.USER_MESSAGE and self.config.repetition.reset_on_user_message:
            self.roster.human_turn()
        if found:
            out.extend(self._settle(found, event.seq, now))
        return out

    def _note(self, event: Event) -> None:
        """What an event of _NOTED says of the session: a validation failure, its end, its usage (priced)."""
        if type(event) is kinds.USAGE:
            self.cost.take(event)
        elif type(event) is kinds.INVALID_LINE:
            self.validation_failures.append((event.seq, event.reason))
        elif type(event) is kinds.VALIDATION_ERROR:
            self.validation_failures.append((event.seq, "validation_error: " + messages.clip(event.message, 160)))
        elif type(event) is kinds.DONE and self.state == RUNNING:
            self.state = DONE

    def _route(self) -> None:
        """Which guards see each event type: every guard but those whose rule is switched off."""
        self.roster.route(self.control.disabled)
        self._observers = self.roster.observers

    def _take_call(self, call: ToolCall, now: float) -> tuple[frozenset[str], Config | None]:
        """The rules that skip this call (`tools.exempt`, `tools.waiting`; remembered for its result) and its
        tool's own config (`tools.limits`); with neither, validation's and runtime's bookkeeping of the call,
        written out here (roster.py, _FUSED): the guards of the common path are called without theirs."""
        self._last_tool = call.tool
        control = self.control
        exempt = control.exempt(call.tool, call.args)
        self.waiting_call = call if "stall" in exempt else None
        pending = self._exempt_calls
        if pending and call.call_id is None:  # without ids a result answers the tool's latest call
            for i in range(len(pending) - 1, -1, -1):
                if pending[i][0].call_id is None and pending[i][0].tool == call.tool:
                    del pending[i]
        if exempt:
            pending.append((call, exempt))
        tuned = control.tuned.get(call.tool) if control.tuned else None
        if not exempt and tuned is None:
            validation = self._validation
            if validation.call_pending:
                validation.count = 0  # the call before was valid
            validation.call_pending = True
            runtime = self.runtime
            runtime.last_activity, runtime.stalled = now, False
            runtime.last_tool, runtime.last_result = call.tool, None
        return exempt, tuned

    def _take_result(self, result: ToolResult, now: float) -> tuple[frozenset[str], Config | None]:
        """The rules its call was exempt from, and its tool's own config; with neither, validation's and
        runtime's bookkeeping of the result (a valid step, and activity), written out as for a call."""
        exempt = self._result_exemptions(result) if self._exempt_calls else NOTHING
        control = self.control
        tuned = control.tuned.get(result.tool or self._last_tool or "") if control.tuned else None
        if not exempt and tuned is None:
            validation = self._validation
            validation.count, validation.call_pending = 0, False
            runtime = self.runtime
            runtime.last_activity, runtime.stalled = now, False
            runtime.last_result = result
        return exempt, tuned

    def _result_exemptions(self, result: ToolResult) -> frozenset[str]:
        for i in range(len(self._exempt_calls) - 1, -1, -1):
            call, exempt = self._exempt_calls[i]
            if result_matches(result, call.call_id, call.tool):
                del self._exempt_calls[i]
                if self.waiting_call is call:
                    self.waiting_call = None
                return exempt
        return NOTHING

    def tick(self, now: float) -> list[Verdict]:
        """Time-based checks: max runtime, stall, gate expiry."""
        return self._tick(now, 0)

    def next_deadline(self) -> float | None:
        """The next moment a time-based rule could fire, so a live shell can sleep until then."""
        if self.state == TERMINATED:
            return None
        self.runtime.waiting_on_human = self._waiting()
        candidates = [d for d in (self.runtime.next_deadline(),) if d is not None]
        timeout = self.config.gates.timeout
        if timeout:
            candidates += [g.opened_at + timeout for g in self.gates.pending()]
        return min(candidates) if candidates else None

    def _tick(self, now: float, seq: int) -> list[Verdict]:
        if self.state == TERMINATED:
            return []
        self.runtime.now = now
        if self.runtime.quiet_until(now) and not self.config.gates.timeout:
            return []
        self.runtime.waiting_on_human = self._waiting()
        found = list(self.runtime.tick(now))
        out = self._settle(found, seq, now) if found else []
        for gate in self.gates.expired(now, self.config.gates.timeout):
            if self.state == TERMINATED:
                break
            out.extend(self.decide(gate.id, self.config.gates.on_timeout == "approve", now,
                                   by="policy", note=None, expired=True))
        return out

    def _waiting(self) -> bool:
        """A human is deciding a gate, or a waiting command runs: neither is a stall."""
        return self.state == GATED or (self.waiting_call is not None and "stall" not in self.control.disabled)

    def _settle(self, found: Iterable[Verdict], seq: int, now: float) -> list[Verdict]:
        """Stamp verdicts, open gates, keep at most one terminate (and nothing after it); a verdict of a
        rule switched off (`rules.disabled`) is dropped here, whichever guard gave it."""
        out: list[Verdict] = []
        off = self.control.disabled
        for verdict in found:
            if self.state == TERMINATED:
                break  # the first reason to end a session is the one it ends with
            if off and verdict.rule in off:
                continue
            verdict.seq = seq
            if verdict.action == Action.GATE or (verdict.action == Action.ESCALATE and verdict.target == "human"):
                if not self._open_gate(verdict, now):
                    continue
            out.append(verdict)
            self.by_rule[verdict.rule] += 1
            if verdict.rule != OPERATOR_RULE:  # the operator's own decisions are not loopwarden's interventions
                self.by_action[verdict.action] += 1
            self.last_verdict = verdict
            if verdict.action == Action.TERMINATE:
                self.state = TERMINATED
                self.termination = verdict
                break
        return out

    def _open_gate(self, verdict: Verdict, now: float) -> bool:
        for gate in self.gates.pending():
            if gate.rule == verdict.rule and gate.reason == verdict.reason:
                return False  # the same question is already waiting
        gate = self.gates.open(verdict.rule, verdict.reason, verdict.evidence, verdict.seq, now)
        verdict.gate_id = gate.id
        if self.state == RUNNING:
            self.state = GATED
        decided = [g for g in self.gates.gates.values() if not g.pending]
        for old in decided[:-_DECIDED_GATES_KEPT]:
            del self.gates.gates[old.id]
        return True

    # ---- human decisions ------------------------------------------------
    def decide(self, gate_id: str, approve: bool, now: float, *, by: str = "operator",
               note: str | None = None, expired: bool = False) -> list[Verdict]:
        """Approve (optionally with guidance, which is injected) or deny (terminate) a gate.

        Any human decision resets the loop counters: a person has looked, so counting starts over. Raises GateError.
        """
        status = "expired" if expired else ("approved" if approve else "denied")
        gate = self.gates.decide(gate_id, status, now, by, note)
        self.reset_counters()
        self.runtime.last_activity, self.runtime.stalled = now, False  # waiting for a human is not a stall
        if not self.gates.pending() and self.state == GATED:
            self.state = RUNNING
        if not approve:
            text = f"session terminated: gate {gate.id} ({gate.rule}) denied by {by}" + (f": {note}" if note else "")
            ending = Termination.BUDGET if gate.rule == BudgetGuard.name else Termination.LOOP_GATE_DENIED
            verdict = terminate("gate", ending, text, gate=gate.id)
            return self._settle([verdict], gate.seq, now)
        if note:
            return self._settle([Verdict(Action.NUDGE, OPERATOR_RULE, f"guidance on gate {gate.id}",
                                         message=messages.gate_guidance(note), gate_id=gate.id)], gate.seq, now)
        return []

    def reconfigure(self, config: Config) -> None:
        """The operator changed a running session's limits (`loopwarden set`): every guard judges the next
        event and tick by them; the counters so far stay. The caller wakes its ticker, since a deadline
        (max_runtime, stall, gate expiry) may have moved."""
        self.config = config
        self._gate_timeout = config.gates.timeout
        self.cost.table = table_of(config.prices.models)
        self.roster.configure(config)
        self.control = ToolControl(config)
        self._route()

    def outside_budgets(self, reached: Mapping[str, Mapping[str, Any]], now: float) -> list[Gate]:
        """The daemon's budgets this session counts against (the day's, its project's) that are reached now,
        scope -> {used, limit, project}; the next call waits while any is (or ends the session: budget_action).
        The budget gates released because none is reached any more, as `release_budget`."""
        self.budget.set_outside(reached)
        self._route()
        return self.release_budget(now)

    def release_budget(self, now: float, by: str = "budget") -> list[Gate]:
        """The pending budget gates approved when no budget is reached any more (one was raised, the day turned):
        the calls they hold go through. Not a human's decision on the loop: the counters stay."""
        if self.budget.reached() is not None:
            return []
        released = [self.gates.decide(g.id, "approved", now, by, "no budget is reached any more")
                    for g in self.gates.pending() if g.rule == BudgetGuard.name]
        if released and not self.gates.pending() and self.state == GATED:
            self.state = RUNNING
            self.runtime.last_activity, self.runtime.stalled = now, False  # held for a budget is not a stall
        return released

    def reset_counters(self, counter: str | None = None) -> None:
        """A human intervention: reset every counter, or the one named."""
        self.roster.reset(counter)

    def started(self, now: float) -> None:
        """The agent's process started at `now`: its runtime and its silence count from then."""
        self.runtime.started_at = self.runtime.last_activity = now

    def never_started(self) -> None:
        """The agent could not be started: the session ends with no termination of its own, not even a kill asked
        for while it was starting."""
        self.termination = None

    def supervisor_failed(self, text: str) -> None:
        """The supervisor itself failed: the session ends as crashed, whatever it was ending for (a bug of ours,
        not a rule's verdict: nothing is counted)."""
        self.state, self.termination = TERMINATED, terminate("supervisor", Termination.CRASHED, text)

    def host_lost(self, text: str) -> None:
        """The machine the agent ran on was lost under it (its pod deleted, the cluster out of reach): the session
        ends as lost, by no rule (nothing is counted)."""
        self.termination = terminate("host", Termination.LOST, text)

    def carried_over(self) -> None:
        """A new run (`continue`) starts from this session's counters, gates and rung: not from its end."""
        self.state = GATED if self.gates.pending() else RUNNING
        self.termination = None

    def withdraw_termination(self) -> None:
        """A loop's end gave way to recovery (a rewind): the session runs on, its counters reset."""
        self.state = GATED if self.gates.pending() else RUNNING
        self.termination = None
        self.reset_counters()

    def grant_authority(self, now: float, *, task: str | None = None, note: str | None = None) -> Verdict:
        """An operator lets the agent work around what blocks `task` (or the current one); the text is injected."""
        verdict = Verdict(Action.UNBLOCK_AUTHORITY, OPERATOR_RULE, "unblock authority granted by an operator",
                          message=messages.operator_authority(task, note))
        self.reset_counters()
        return self._settle([verdict], 0, now)[0]

    def operator_terminate(self, now: float, note: str | None = None) -> list[Verdict]:
        text = "session terminated by an operator" + (f": {note}" if note else "")
        return self._settle([terminate(OPERATOR_RULE, Termination.OPERATOR, text)], 0, now)

    def kill_terminate(self, now: float, note: str | None = None, *, daemon_stopping: bool = False) -> list[Verdict]:
        """An operator's kill, or (`daemon_stopping`) the daemon stopping (stop-daemon, or a signal to it):
        the session ends with it, and is not recorded as killed by an operator."""
        if not daemon_stopping:
            return self.operator_terminate(now, note)
        text = "session terminated: the daemon stopped (loopwarden stop-daemon, or a signal to the daemon)"
        return self._settle([terminate("daemon", Termination.DAEMON_STOPPED, text)], 0, now)

    def supervisor_terminate(self, reason: Termination, text: str, now: float) -> list[Verdict]:
        """End the session for what the supervisor itself saw (an agent that stopped reading its input)."""
        return self._settle([terminate("supervisor", reason, text)], 0, now)

    def end_as_stored(self, verdict: Verdict, now: float) -> list[Verdict]:
        """A termination decided outside the rules (an operator's kill, the daemon's stop, a sampled resource),
        settled as it was stored: what a session rebuilt from the store takes in place of the call that made it."""
        return self._settle([verdict], verdict.seq, now)

    # ---- views ----------------------------------------------------------
    def pending_gates(self) -> list[Gate]:
        return self.gates.pending()

    def gate(self, gate_id: str) -> Gate | None:
        """A gate, pending or decided (the last decided ones are kept), by its id."""
        return self.gates.gates.get(gate_id)

    def decided_gates(self) -> list[Gate]:
        return [g for g in self.gates.gates.values() if not g.pending]

    def all_gates(self) -> list[Gate]:
        """Every gate kept, pending or decided, in the order they opened."""
        return list(self.gates.gates.values())

    def clock_counters(self, now: float) -> list[Counter]:
        """The counters that move with time alone (runtime, silence), as of `now`."""
        return self.runtime.counters(now)

    def counters(self, now: float | None = None) -> list[Counter]:
        """Every counter against its limit; the clock's counters as of `now` when given (a live session)."""
        return self.roster.counters(now)

    def interventions(self) -> dict[str, int]:
        """How often each kind of verdict short of ending the session was given: {"nudge": 2, "block": 1}."""
        return {str(action): n for action, n in self.by_action.items() if action != Action.TERMINATE}

    @property
    def events(self) -> int:
        """Events judged so far (resource samples are not events of the agent's)."""
        return sum(self.by_type.values())

    @property
    def validation_total(self) -> int:
        """Every validation failure so far (invalid lines and validation_error events)."""
        return self._validation.total

    @property
    def termination_reason(self) -> Termination | None:
        return self.termination.termination if self.termination else None
