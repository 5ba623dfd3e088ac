"""Which gate a request names: SESSION:GATE, a gate id pending in one session only, or a session with one gate."""

from __future__ import annotations

from typing import Any, NoReturn

import anyio

from .contract import Supervised
from .registry import SessionRegistry, UnknownSession
from .requests import RequestError


async def gate_ref(registry: SessionRegistry, ref: Any) -> tuple[Supervised, str]:
    """The live session and gate id a reference names: SESSION:GATE, a GATE id pending in one session
    only, or a SESSION with exactly one pending gate."""
    if not isinstance(ref, str) or not ref:
        raise RequestError("a gate reference is required, such as s3:g1 (see 'loopwarden gates')")
    sessions = registry.sessions
    if ":" in ref:
        sid, gate_id = ref.rsplit(":", 1)
        sid = await registry.resolve(sid)
        session = sessions.get(sid)
        if session is None or session.final:
            await ended_gate(registry, sid, session, gate_id)
        return session, gate_id
    owners = [s for s in sessions.values() if not s.final and s.health.gate(ref) is not None]
    if len(owners) > 1:
        shown = ", ".join(f"{s.spec.id}:{ref}" for s in owners[:8])
        raise RequestError(f"gate {ref!r} is pending in several sessions ({shown}); use SESSION:GATE")
    if owners:
        return owners[0], ref
    try:
        session = await registry.live(ref)  # a session: its one pending gate
    except UnknownSession:
        raise RequestError(f"no pending gate or session {ref[:80]!r} (see 'loopwarden gates')") from None
    pending = [g.id for g in session.health.pending_gates()]
    if len(pending) != 1:
        which = f"{len(pending)} pending gates ({', '.join(f'{session.spec.id}:{g}' for g in pending[:8])})"
        raise RequestError(f"session {session.spec.id} has {which if pending else 'no pending gate'}; "
                           "name one as SESSION:GATE (see 'loopwarden gates')")
    return session, pending[0]


async def ended_gate(registry: SessionRegistry, sid: str, session: Supervised | None, gate_id: str) -> NoReturn:
    """Refuse a decision on a gate of an ended session, saying how the gate was decided if it was. An
    ended session still in memory knows (its last records may not be stored yet); else the store does."""
    if session is not None:
        gate = session.health.gate(gate_id)
        status, by = (gate.status, gate.decided_by) if gate is not None else ("pending", None)
    else:  # rare: it has left memory, its records all stored
        store = registry.store
        gates = await anyio.to_thread.run_sync(store.gates, sid) if store is not None else []
        row = next((g for g in gates if g.get("gate_id") == gate_id), {})
        status, by = row.get("status", "pending"), row.get("decided_by")
    if status != "pending":
        raise RequestError(f"gate {sid}:{gate_id} was already {status} by {by}")
    raise RequestError(f"session {sid} has ended; only its history remains")
