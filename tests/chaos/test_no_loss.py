"""No event is lost, and none without a count: every line agents wrote before they exited is stored,
however far behind the store is; an event whose verdict reached its agent, and an operator action
answered ok, survive a SIGKILL of the daemon."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

FLOODS, EVENTS = 40, 2500


def db(lw: Harness) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{lw.paths.database}?mode=ro", uri=True)


def test_every_line_of_forty_floods_is_stored_however_far_behind_the_store_is(lw: Harness) -> None:
    sids = [lw.launch(PY, str(AGENTS / "flood.py"), str(EVENTS), name=f"flood{i}") for i in range(FLOODS)]
    snaps = {sid: lw.wait_state(sid, "exited", timeout=300) for sid in sids}
    lw.request("logs", session=sids[0], limit=1)  # writes what is still queued
    with db(lw) as conn:
        stored = dict(conn.execute("SELECT session_id, count(*) FROM events GROUP BY session_id").fetchall())
    assert {sid: stored.get(sid, 0) for sid in sids} == {sid: EVENTS + 2 for sid in sids}  # hello + EVENTS + done
    assert all(snap["dropped_events"] == 0 for snap in snaps.values())


def test_an_event_whose_verdict_reached_the_agent_survives_a_sigkill_of_the_daemon(lw: Harness, tmp_path: Path) -> None:
    assert lw.daemon is not None
    records = [tmp_path / f"acked{i}" for i in range(3)]
    sids = [lw.run_detached(PY, str(AGENTS / "verdict_recorder.py"), str(r), name=f"rec{i}")
            for i, r in enumerate(records)]
    for i in range(3):  # floods keep the store busy while verdicts are answered
        lw.run_detached(PY, str(AGENTS / "flood.py"), "100000000", name=f"flood{i}")

    def acked(record: Path) -> set[int]:
        return {int(x) for x in record.read_text().split()} if record.exists() else set()

    wait_for(lambda: all(len(acked(r)) >= 30 for r in records), timeout=60, what="30 verdicts to each recorder")
    os.kill(lw.daemon.pid, signal.SIGKILL)
    lw.daemon.wait(10)
    answered = missing = 0
    with db(lw) as conn:
        for sid, record in zip(sids, records, strict=True):
            seqs = acked(record)  # read after the kill: nothing more can arrive
            stored = {row[0] for row in conn.execute("SELECT seq FROM events WHERE session_id = ?", [sid])}
            answered += len(seqs)
            missing += len(seqs - stored)
    assert answered >= 90 and missing == 0, f"{missing} of {answered} answered events were lost"


def test_an_operator_action_answered_ok_is_in_the_audit_even_if_the_daemon_dies_right_after(lw: Harness) -> None:
    assert lw.daemon is not None
    sid = lw.scenario("gate_request")
    gate = wait_for(lambda: lw.status(sid)["pending_gates"], timeout=60, what="the gate")[0]
    lw.request("approve", gate=f"{sid}:{gate}", note="go on")
    os.kill(lw.daemon.pid, signal.SIGKILL)  # at once: nothing gets another chance to be written
    lw.daemon.wait(10)
    with db(lw) as conn:
        rows = conn.execute("SELECT action, target, note, outcome FROM actions WHERE session_id = ?", [sid]).fetchall()
    assert ("approve", f"{sid}:{gate}", "go on", "done") in rows  # the audit names a gate SESSION:GATE
