"""The daemon's control operations: what clients ask for (`op_<name>`), each checked, audited and carried out."""

from __future__ import annotations

import gc
import os
from dataclasses import replace
from typing import Any, NoReturn

import anyio
import psutil

from ..sessions.base import Adapter, Capability
from ..supervisor.config import Config, ConfigError, change, load_config, show_value, value_of
from ..supervisor.gates import GateError
from ..supervisor.counters import RESETTABLE
from ..supervisor.verdicts import FINAL_STATES, SessionState, final_exit_code
from . import oom
from .adopted import AdoptedSession
from .commands import default_name, missing_program
from .contract import Supervised, refusal
from .parts import PROTOCOL, SHUTDOWN_CAP, AlreadyAudited, DaemonParts, RequestError
from .principal import Principal, agent_environment
from .processes import adoption_refusal, process_rows
from .registry import UnknownSession, _row_snapshot
from .restarts import Restartable
from .requests import BadRequest, adopt_request, attempted_target, request_note, run_request, set_values
from .session import LiveSession, SessionSpec, minimal_env
from .spill import Spiller
from .spill_bounds import SpillBounds
from .store import HISTORY_TABLES
from .upkeep import _before

LIST_PAGE = 1000  # sessions in one page of older history (`list` with `before`)
LIST_BYTES = 8 << 20  # ... and at most this many bytes of their snapshots
LOGS_LIMIT = 10_000  # rows of each table in one `logs` page
LOGS_BYTES = 4 << 20  # text in one `logs` page: a reply (and the daemon) never holds more per request
SPILLS_SHOWN = 200  # the newest spill files listed with a `logs` page
INJECT_CHARS = 100_000  # operator text sent to an agent in one `inject`
REWIND_TURNS = 100  # turns one `rewind` may drop
CURSOR = {"events": "after", "verdicts": "verdicts_after", "actions": "actions_after"}


def _seconds(value: Any) -> float:
    """A non-negative number of seconds from a request (anything else: 0)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0.0


def _warned(result: dict[str, Any], warning: str | None) -> dict[str, Any]:
    return {**result, "warning": warning} if warning else result


def _count(value: Any, default: int, most: int) -> int:
    """A whole number from a request, between 1 and `most` (`default` when absent or not a number)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return default
    return max(1, min(value, most))


def _cursor(value: Any) -> int:
    """A row id to read after (0: from the start)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _no_store(what: str) -> RequestError:
    return RequestError(f"the store is not open (see 'loopwarden status'); {what}", kind="daemon")


def _ago(seconds: float) -> str:
    from ..supervisor.config import format_duration

    return f"{format_duration(seconds)} ago"


class ControlOperations(DaemonParts):
    """Every `op_<name>` a client may ask for: checked, audited, carried out."""

    async def _target_session(self, req: dict[str, Any]) -> str | None:
        """The session a request names (by `session`, a gate's SESSION:GATE or a gate given as its session),
        if it exists and is one."""
        gate = req.get("gate")
        ref = req.get("session") or (gate.rsplit(":", 1)[0] if isinstance(gate, str) else None)
        try:
            return await self._resolve(ref) if ref else None
        except RequestError:
            return None

    async def _audited(self, who: Principal, session_id: str | None, action: str, target: str | None,
                       note: str | None, outcome: str, *, stops: bool = False) -> str | None:
        """Record an operator action durably before it is carried out, or refuse it. An action that
        stops an agent (`stops`) is carried out anyway, since refusing it would leave a runaway agent
        running on a full disk: it returns the warning for the reply instead (the loss is counted)."""
        if await self._durably(self._audit(who, session_id, action, target, note, outcome)):
            return None
        error = (self.recorder.health.last_error or "unknown error")[:200]
        if stops:
            return f"done, but the audit log could not be written ({error}); the row is counted as unwritten"
        raise AlreadyAudited(f"refused: the audit log could not be written ({error}); nothing was done. Free "
                             "some space (see 'loopwarden status'); kill, pause, deny and stop-daemon still work",
                             kind="daemon")

    async def _refused(self, who: Principal, op: str, req: dict[str, Any], reason: str) -> None:
        """A refused operator action in the audit log: what it aimed at (a gate as SESSION:GATE), and why."""
        note = request_note(req) or request_note({"note": req.get("text")})
        target, sid, gate = attempted_target(req), await self._target_session(req), req.get("gate")
        if isinstance(gate, str):
            try:
                session, gate_id = await self._gate_ref(gate)
                sid, target = session.spec.id, f"{session.spec.id}:{gate_id}"[:200]
            except RequestError:  # no such live gate: named as asked, its session by id
                if sid and ":" in gate:
                    target = f"{sid}:{gate.rsplit(':', 1)[1]}"[:200]
        self._audit(who, sid, "stop-daemon" if op == "shutdown" else op, target, note, reason)

    async def op_ping(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        """The daemon's own state, with what could not be written or delivered since it started."""
        return {"protocol": PROTOCOL, "pid": os.getpid(), "sessions": len(self.sessions),
                "live": sum(1 for s in self.sessions.values() if not s.final),
                "uptime": round(self.clock() - self.started_at, 1), "socket": str(self.paths.socket),
                "database": str(self.paths.database), **self._health(), "subscribers": len(self.subscribers),
                "queued_for_subscribers": self.queue_budget.used, "stopping": self.shutting_down,
                "guardian": {"pid": self.guardian.pid, "restarts": self.guardian.restarts},
                "containment": self.containment,
                "oom_score_adj": {"daemon": oom.own_score(), "agents": self.agent_oom},
                "gc": {"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}}

    def _refuse_after_audit(self, who: Principal, sid: str, op: str) -> None:
        """A shutdown that began while the audit row was written: the session never starts, and says so."""
        if self.shutting_down:
            self._audit(who, sid, op, None, None, "failed: the daemon began shutting down")
            try:
                self._refuse_while_stopping(op)
            except RequestError as exc:
                raise AlreadyAudited(str(exc), kind="daemon") from None

    def _refuse_while_stopping(self, op: str) -> None:
        if self.shutting_down:
            raise RequestError(f"the daemon is shutting down and starts no more sessions; {op} again once it "
                               "has stopped (a new one starts then)", kind="daemon")

    async def op_run(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        self._refuse_while_stopping("run")
        from ..sessions.registry import adapters

        try:
            spec_in = run_request(req.get("spec"), adapters())
        except BadRequest as exc:
            raise RequestError(str(exc)) from None
        command, env = spec_in.command, spec_in.env
        try:
            config = load_config(preset=spec_in.preset, file=spec_in.config_file, env=spec_in.config_env,
                                 sets=spec_in.sets)
        except ConfigError as exc:
            raise RequestError(str(exc)) from None
        missing = missing_program(command[0], env.get("PATH"), spec_in.cwd)
        if missing:
            raise RequestError(missing)
        sid = self._new_id()
        env = {**(env or minimal_env()), **agent_environment(self.paths.socket)}  # its own CLI calls refuse early
        await self._audited(who, sid, "run", " ".join(command)[:200], None, "started")
        self._refuse_after_audit(who, sid, "run")
        # named after the last await, so that two runs at once never both take a free name
        asked = spec_in.name or default_name(command)[:80]
        spec = SessionSpec(id=sid, name=asked, command=command, adapter=spec_in.adapter, cwd=spec_in.cwd, env=env,
                           preset=config.preset, sets=spec_in.sets, task=spec_in.task)
        return self._launch(spec, config, adapters()[spec_in.adapter]())

    def _launch(self, spec: SessionSpec, config: Config, adapter: Adapter) -> dict[str, Any]:
        """Name `spec` (unique among live sessions), start it, and reply its id and name."""
        asked = spec.name
        name, renamed = self._unique_name(asked)  # a live session has it: name-2
        spec.name, sid = name, spec.id
        spiller = Spiller(config.spill.dir or self.paths.spill, preview_chars=config.spill.preview_chars,
                          truncate_chars=config.spill.threshold_chars, retention=config.spill.retention,
                          session=sid, bounds=SpillBounds.of(config.spill, self.spill_ledger))
        session = LiveSession(spec, config, adapter, sink=self.sink, spiller=spiller,
                              on_group=self._guard_group, clock=self.clock, records=self.recorder,
                              containment=self._containment(sid),  # its cgroup, once it is sure to start
                              sink_rows=self.sink_rows)
        self.sessions[sid] = session
        self._mark(sid)
        self._cleaner_wake.set()  # its spill retention may be the shortest yet
        self._tg.start_soon(self._run_session, session)
        return {"id": sid, "name": name, **({"renamed_from": asked} if renamed else {})}

    async def op_adopt(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        self._refuse_while_stopping("adopt")
        try:
            checked = adopt_request(req)
        except BadRequest as exc:
            raise RequestError(str(exc)) from None
        pid = checked.pid
        refusal = adoption_refusal(pid, peer_pid=who.pid)
        if refusal:
            raise RequestError(refusal)
        try:
            config = load_config(preset=checked.preset, env={}, sets=checked.sets)
        except ConfigError as exc:
            raise RequestError(str(exc)) from None
        try:
            session = AdoptedSession("pending", pid, config, name=checked.name, sink=self.sink, clock=self.clock)
        except (ProcessLookupError, psutil.NoSuchProcess):
            raise RequestError(f"no process {pid}") from None
        except (PermissionError, psutil.AccessDenied):
            raise RequestError(f"process {pid} belongs to another user") from None
        sid = session.spec.id = self._new_id()
        await self._audited(who, sid, "adopt", str(pid), None, "watching")
        self._refuse_after_audit(who, sid, "adopt")
        asked = session.spec.name  # named after the last await, as in op_run
        session.spec.name, renamed = self._unique_name(asked)
        self.sessions[sid] = session
        self._mark(sid)
        self._tg.start_soon(self._run_session, session)
        return {"id": sid, "name": session.spec.name, **({"renamed_from": asked} if renamed else {})}

    async def op_list(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        """Every live session and the newest ended ones, oldest first. With `stored: true`, a page of the
        store instead, newest first: `limit` sessions created before session `before` (or the newest)."""
        if not req.get("stored"):
            return [self._snapshot(sid) for sid in self._all_sessions()]
        before, limit = req.get("before"), _count(req.get("limit"), LIST_PAGE, LIST_PAGE)
        if before is not None and not isinstance(before, str):
            raise RequestError("'before' must be a session id")
        store = self.store
        if store is None:
            raise _no_store("only recent sessions are shown")
        rows = await anyio.to_thread.run_sync(lambda: store.recent_sessions(LIST_BYTES, before=before, limit=limit))
        return [_row_snapshot(row) for row in reversed(rows)]

    async def op_status(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        return self._snapshot(await self._resolve(req.get("session")))

    async def op_logs(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        """A page of a session's stored history, bounded by `limit` rows a table and by bytes.

        tail: the newest records. Otherwise the records after the cursors (`after`, `verdicts_after`,
        `actions_after`), merged by time. `newest: N` returns only the cursors from which the newest N
        of each table follow (`start`) and the newest ids now (`end`). Replies carry `next` (the cursors to
        continue from) and `more`."""
        sid = await self._resolve(req.get("session"))
        await self._flush()
        store = self.store
        if store is None:
            raise _no_store("history cannot be read now")
        limit = _count(req.get("limit"), 1000, LOGS_LIMIT)
        max_bytes = _count(req.get("max_bytes"), LOGS_BYTES, LOGS_BYTES)
        tables = req.get("tables")
        tables = [t for t in HISTORY_TABLES if t in tables] if isinstance(tables, list) else list(HISTORY_TABLES)
        cursors = {t: _cursor(req.get(CURSOR[t])) for t in HISTORY_TABLES}
        newest = req.get("newest")

        def read() -> dict[str, Any]:  # in a worker thread, so a long read never stalls the sessions
            if newest is not None:
                n = _count(newest, 1000, 1 << 31)
                return {"session": sid, "start": {CURSOR[t]: store.newest_start(sid, t, n) for t in tables},
                        "end": {CURSOR[t]: store.newest_start(sid, t, 0) for t in tables}}
            if req.get("tail"):
                rows, more = store.newest(sid, limit=limit, max_bytes=max_bytes, tables=tables)
                after = {t: (rows[t][-1]["id"] if rows[t] else cursors[t]) for t in HISTORY_TABLES}
            else:
                rows, after, more = store.history(sid, cursors, limit=limit, max_bytes=max_bytes, tables=tables)
            return {"session": sid, **rows, "spills": store.spills(sid, limit=SPILLS_SHOWN), "more": more,
                    "next": {CURSOR[t]: after[t] for t in HISTORY_TABLES}}

        return await anyio.to_thread.run_sync(read)

    async def op_processes(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        """The agent's process tree (and, for a session we started, its whole process group)."""
        sid = await self._resolve(req.get("session"))
        for ended in [k for k, s in self.sessions.items() if s.final and k in self._proc_cache]:
            del self._proc_cache[ended]
        session = self.sessions.get(sid)
        if session is None or session.final or not session.pid:
            return []
        root, cache = session.pid, self._proc_cache.get(sid, {})
        group = Capability.PROCESS_GROUP in session.capabilities
        rows, self._proc_cache[sid] = await anyio.to_thread.run_sync(lambda: process_rows(root, group, cache))
        return rows

    async def op_gates(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        out = []
        for sid, session in self.sessions.items():
            if session.final:
                continue
            for gate in session.health.pending_gates():
                out.append({"session": sid, "name": session.spec.name, **gate.to_dict(), "ref": f"{sid}:{gate.id}"})
        return sorted(out, key=lambda g: g["opened_at"])

    async def _gate_ref(self, ref: Any) -> tuple[Supervised, str]:
        """The live session and gate id a reference names: SESSION:GATE, a GATE id pending in one session
        only, or a SESSION with exactly one pending gate."""
        if not isinstance(ref, str) or not ref:
            raise RequestError("a gate reference is required, such as s3:g1 (see 'loopwarden gates')")
        if ":" in ref:
            sid, gate_id = ref.rsplit(":", 1)
            sid = await self._resolve(sid)
            session = self.sessions.get(sid)
            if session is None or session.final:
                await self._ended_gate(sid, session, gate_id)
            return session, gate_id
        owners = [s for s in self.sessions.values() if not s.final and ref in s.health.gates.gates]
        if len(owners) > 1:
            shown = ", ".join(f"{s.spec.id}:{ref}" for s in owners[:8])
            raise RequestError(f"gate {ref!r} is pending in several sessions ({shown}); use SESSION:GATE")
        if owners:
            return owners[0], ref
        try:
            session = await self._live(ref)  # a session: its one pending gate
        except UnknownSession:
            raise RequestError(f"no pending gate or session {ref[:80]!r} (see 'loopwarden gates')") from None
        pending = [g.id for g in session.health.pending_gates()]
        if len(pending) != 1:
            which = f"{len(pending)} pending gates ({', '.join(f'{session.spec.id}:{g}' for g in pending[:8])})"
            raise RequestError(f"session {session.spec.id} has {which if pending else 'no pending gate'}; "
                               "name one as SESSION:GATE (see 'loopwarden gates')")
        return session, pending[0]

    async def _ended_gate(self, sid: str, session: Supervised | None, gate_id: str) -> NoReturn:
        """Refuse a decision on a gate of an ended session, saying how the gate was decided if it was. An
        ended session still in memory knows (its last records may not be stored yet); else the store does."""
        if session is not None:
            gate = session.health.gates.gates.get(gate_id)
            status, by = (gate.status, gate.decided_by) if gate is not None else ("pending", None)
        else:  # rare: it has left memory, its records all stored
            store = self.store
            gates = await anyio.to_thread.run_sync(store.gates, sid) if store is not None else []
            row = next((g for g in gates if g.get("gate_id") == gate_id), {})
            status, by = row.get("status", "pending"), row.get("decided_by")
        if status != "pending":
            raise RequestError(f"gate {sid}:{gate_id} was already {status} by {by}")
        raise RequestError(f"session {sid} has ended; only its history remains")

    async def _decide(self, req: dict[str, Any], approve: bool, who: Principal) -> dict[str, Any]:
        note, verb = request_note(req), "approve" if approve else "deny"
        session, gate_id = await self._gate_ref(req.get("gate"))
        ref = f"{session.spec.id}:{gate_id}"  # how the audit log and every reply name a gate
        cannot = refusal(session, verb)
        if cannot:
            raise RequestError(cannot)
        gate = session.health.gates.gates.get(gate_id)
        if gate is None:
            raise RequestError(f"no gate {ref} (see 'loopwarden gates')")
        if not gate.pending:
            raise RequestError(f"gate {ref} was already {gate.status} by {gate.decided_by}")
        warning = await self._audited(who, session.spec.id, verb, ref, note, "done", stops=not approve)
        try:
            await session.decide(gate_id, approve, who.actor, note)
        except GateError as exc:  # decided meanwhile (an expiry, another console): say so in the audit too
            self._audit(who, session.spec.id, verb, ref, note, f"failed: {exc}")
            raise AlreadyAudited(str(exc)) from None
        return _warned({"session": session.spec.id, "gate": gate_id, "ref": ref,
                        "status": "approved" if approve else "denied"}, warning)

    async def op_approve(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        return await self._decide(req, True, who)

    async def op_deny(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        return await self._decide(req, False, who)

    async def op_grant(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._capable(req, "grant")
        note = request_note(req)
        await self._audited(who, session.spec.id, "grant", None, note, "injected")
        verdict = session.grant(note)
        return {"session": session.spec.id, "message": verdict.message}

    async def op_reset(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._capable(req, "reset")
        counter = req.get("counter")
        if counter is not None and counter not in RESETTABLE:
            raise RequestError(f"unknown counter {str(counter)[:40]!r}; use one of {', '.join(sorted(RESETTABLE))}")
        await self._audited(who, session.spec.id, "reset", counter or "all", request_note(req), "done")
        session.reset(counter)
        return {"session": session.spec.id, "reset": counter or "all"}

    async def op_set(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Change a running session's limits (`values`: KEY -> value); the engine takes them at once.
        Replies `changed`: KEY -> [old, new], converted, for each key whose value moved."""
        session = await self._live(req.get("session"))
        try:
            values = set_values(req.get("values"))
            config = change(session.config, values)
        except (BadRequest, ConfigError) as exc:
            raise RequestError(str(exc)) from None
        before = session.config
        moved = [k for k in values if value_of(before, k) != value_of(config, k)]
        note = "; ".join(f"{k}: {show_value(k, value_of(before, k))} -> {show_value(k, value_of(config, k))}"
                         for k in moved)
        await self._audited(who, session.spec.id, "set", ",".join(values)[:200], note or "no change", "done")
        before = session.config  # another `set` may have landed while the audit row was written: keep its keys
        session.reconfigure(change(before, values))
        after = session.config  # an attached session keeps its own rules (no stall)
        return {"session": session.spec.id,
                "changed": {k: [value_of(before, k), value_of(after, k)] for k in moved
                            if value_of(before, k) != value_of(after, k)}}

    async def op_inject(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._capable(req, "inject")
        text = req.get("text")
        if not isinstance(text, str) or not text.strip():
            raise RequestError("inject needs some text")
        if len(text) > INJECT_CHARS:
            raise RequestError(f"inject text is {len(text):,} characters; the limit is {INJECT_CHARS:,}")
        await self._audited(who, session.spec.id, "inject", None, text[:500], "sent")
        session.inject(text)
        return {"session": session.spec.id}

    async def op_rewind(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Drop the last `turns` turns of the agent's conversation and retry with the loop's evidence as guidance."""
        session = await self._capable(req, "rewind")
        turns = req.get("turns", 1)
        if not isinstance(turns, int) or isinstance(turns, bool) or not 1 <= turns <= REWIND_TURNS:
            raise RequestError(f"'turns' must be a whole number from 1 to {REWIND_TURNS}")
        if not isinstance(session, LiveSession):
            raise RequestError(f"session {session.spec.id} was not launched by loopwarden; it cannot be rewound")
        note = request_note(req)
        await self._audited(who, session.spec.id, "rewind", f"{turns} turn{'s' if turns != 1 else ''}", note,
                            "rewinding")
        try:
            verdict = session.rewind(turns, note, by=who.actor)
        except ValueError as exc:
            self._audit(who, session.spec.id, "rewind", None, note, f"failed: {exc}")
            raise AlreadyAudited(f"session {session.spec.id}: {exc}") from None
        return {"session": session.spec.id, "turns": turns, "guidance": verdict.evidence["guidance"]}

    async def op_restart(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Start the task of a launched session again, as a new session whose first message is a summary of
        what failed; a session still running is stopped first."""
        self._refuse_while_stopping("restart")
        sid = await self._resolve(req.get("session"))
        old = self.sessions.get(sid)
        if isinstance(old, LiveSession):
            task = Restartable(old.spec, old.config, *old.failed())
        elif old is None and (kept := self.restartable.get(sid)) is not None:
            task = kept
        else:
            why = ("was not launched by loopwarden" if old is not None else
                   "is no longer in this daemon's memory (its environment is never stored)")
            raise RequestError(f"session {sid} {why}; start its task again with 'loopwarden run'")
        from ..sessions.registry import adapters

        note = request_note(req)
        summary = task.summary(note)
        adapter = adapters()[task.spec.adapter]()
        if not adapter.preface(summary):
            raise RequestError(f"session {sid} ({task.spec.adapter}) cannot take a first message, so a restart could "
                               "not tell it what failed; start it again with 'loopwarden run' (see 'loopwarden "
                               "adapters')")
        new = self._new_id()
        warning = await self._audited(who, sid, "restart", new, summary[:500], "restarting", stops=True)
        self._refuse_after_audit(who, new, "restart")
        if old is not None and not old.final:
            self._tg.start_soon(old.kill, f"restarted as {new}" + (f": {note}" if note else ""))
        spec = replace(task.spec, id=new, env=dict(task.spec.env), sets=list(task.spec.sets))
        started = self._launch(spec, task.config, adapter)
        return _warned({**started, "restarted": sid, "summary": summary}, warning)

    async def _capable(self, req: dict[str, Any], op: str) -> Supervised:
        """The live session a request names, if it can carry out `op` (see contract.NEEDS)."""
        session = await self._live(req.get("session"))
        cannot = refusal(session, op)
        if cannot:
            raise RequestError(cannot)
        return session

    async def op_pause(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._live(req.get("session"))
        warning = await self._audited(who, session.spec.id, "pause", None, request_note(req), "done", stops=True)
        was = session.snapshot()["state"]
        session.pause()
        state = session.snapshot()["state"]
        return _warned({"session": session.spec.id, "state": state, "changed": state != was}, warning)

    async def op_resume(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self._live(req.get("session"))
        await self._audited(who, session.spec.id, "resume", None, request_note(req), "done")
        was = session.snapshot()["state"]
        session.resume()
        state = session.snapshot()["state"]
        return {"session": session.spec.id, "state": state, "changed": state != was}

    async def op_kill(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Stop a session. One attached by hooks that has ended while its agent process still runs (a
        terminated Codex calling its model on) has that process stopped."""
        sid = await self._resolve(req.get("session"))
        live = self.sessions.get(sid)
        if (live is None or live.final) and self.hook_claims.of(sid):
            warning = await self._audited(who, sid, "kill", None, request_note(req), "stopping its agent process",
                                          stops=True)
            self._tg.start_soon(self._stop_ended_agent, sid)
            return _warned({"session": sid, "state": self._snapshot(sid).get("state"),
                            "agent_pids": [p.pid for p in self.hook_claims.of(sid)]}, warning)
        session = await self._live(sid)
        note = request_note(req)
        warning = await self._audited(who, session.spec.id, "kill", None, note, "stopping", stops=True)
        if not (isinstance(session, LiveSession) and session.kill_soon(note)):  # (a launched one: by its ticker)
            self._tg.start_soon(session.kill, note)
        return _warned({"session": session.spec.id, "state": SessionState.STOPPING}, warning)

    async def op_actions(self, req: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        await self._flush()
        store = self.store
        if store is None:
            raise _no_store("the audit log cannot be read now")
        sid = await self._resolve(req["session"]) if req.get("session") else None
        limit = _count(req.get("limit"), 1000, LOGS_LIMIT)
        return await anyio.to_thread.run_sync(lambda: store.actions(session_id=sid, limit=limit))

    async def op_exit_code(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        snap = self._snapshot(await self._resolve(req.get("session")))
        return {"final": snap.get("state") in FINAL_STATES, "exit_code": final_exit_code(snap)}

    async def op_prune(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Delete the history of sessions that ended more than `older_than` seconds ago (and, with
        `audit_older_than`, audit rows that old); `dry_run` only counts."""
        older = req.get("older_than")
        if not isinstance(older, (int, float)) or isinstance(older, bool) or older < 0:
            raise RequestError("prune needs 'older_than', a number of seconds >= 0")
        audit = req.get("audit_older_than")
        if audit is not None and (not isinstance(audit, (int, float)) or isinstance(audit, bool) or audit < 0):
            raise RequestError("'audit_older_than' must be a number of seconds >= 0")
        store = self.store
        if store is None:
            raise _no_store("nothing can be pruned now")
        now = self.clock()
        if req.get("dry_run"):
            counts = await anyio.to_thread.run_sync(lambda: store.prunable(now - older, _before(now, audit)))
            return {"dry_run": True, "deleted": counts}
        await self._audited(who, None, "prune", f"ended before {_ago(older)}", request_note(req), "pruning")
        return {"dry_run": False, "deleted": await self._prune(now - older, _before(now, audit))}

    async def op_shutdown(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Stop every session and exit, within SHUTDOWN_CAP; `run` and `adopt` are refused from now on.
        With `unless_live`, only when no session is live: else nothing happens and the reply names them
        (`{stopping: false, live: [{id, name}]}`), for the client to ask its user first."""
        live = [{"id": sid, "name": s.spec.name} for sid, s in self.sessions.items() if not s.final]
        if req.get("unless_live") and live:
            return {"stopping": False, "live": live}
        self._begin_shutdown()
        warning = await self._audited(who, None, "stop-daemon", None, request_note(req), "stopping", stops=True)
        self._tg.start_soon(self._stop_soon)
        return _warned({"stopping": True, "sessions": len([s for s in self.sessions.values() if not s.final]),
                        "pid": os.getpid(), "within": SHUTDOWN_CAP}, warning)
