"""Agents outlive the daemon: a daemon SIGKILLed mid-flood is started again by the keeper and takes every session up
(nothing lost, nothing judged twice, the same verdicts as an uninterrupted run); restart-daemon hands every session
over with its open gate."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for

AGENTS = Path(__file__).resolve().parent.parent / "agents"
VERDICT_LOG = str(AGENTS / "verdict_log.py")
ECHO = str(AGENTS / "echo_handshake.py")
FLOOD = str(AGENTS / "paced_flood.py")


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[Harness]:
    """A daemon whose agents the keeper holds (daemon.keep_agents)."""
    harness = Harness(tmp_path)
    harness.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    harness.paths.config_file.write_text("[daemon]\nkeep_agents = true\n")
    with harness:
        yield harness
    harness.cli("stop-daemon", "--yes")  # a daemon the keeper started is not the harness's own


def other_daemon(lw: Harness, old: int) -> dict[str, Any]:
    """The daemon answering once `old` is gone (the keeper starts it)."""
    def answers() -> dict[str, Any] | None:
        try:
            ping = lw.request("ping")
        except Exception:  # noqa: BLE001 - none answers yet
            return None
        return ping if ping["pid"] != old else None
    return wait_for(answers, 60, "a new daemon")


def ended(lw: Harness, sids: list[str], timeout: float = 180) -> dict[str, dict[str, Any]]:
    def check() -> dict[str, dict[str, Any]] | None:
        snaps = {s["id"]: s for s in lw.request("list", all=True) if s["id"] in sids}
        done = all(snaps.get(sid, {}).get("state") in ("exited", "terminated", "lost") for sid in sids)
        return snaps if done else None
    return wait_for(check, timeout, "every session to end", every=0.2)


def tool_calls(lw: Harness, sid: str) -> list[str]:
    return [e["data"]["call_id"] for e in lw.events(sid) if e["kind"] == "tool_call"]


def test_a_daemon_killed_mid_flood_is_replaced_and_takes_every_agent_up(kept: Harness, tmp_path: Path) -> None:
    """50 handshake agents flooding; SIGKILL the daemon: the keeper starts another, every agent goes on to its end,
    every call is stored once and judged once, whatever the daemon had read and not stored read again."""
    calls = 150
    sids = [kept.launch(PY, ECHO, str(calls)) for _ in range(50)]
    wait_for(lambda: sum(s["tool_calls"] for s in kept.request("list")) >= 50 * calls // 4, 120,
             "a quarter of the calls", every=0.1)
    assert kept.daemon is not None
    old = kept.daemon.pid
    os.kill(old, signal.SIGKILL)
    kept.daemon.wait()
    other_daemon(kept, old)
    snaps = ended(kept, sids)
    for sid in sids:
        assert snaps[sid]["state"] == "exited" and snaps[sid]["exit_code"] == 0, snaps[sid]
        assert tool_calls(kept, sid) == [f"e{i}" for i in range(1, calls + 1)]  # each once, in order
        assert snaps[sid]["tool_calls"] == calls  # counted across the take-up
        judged = [v for v in kept.verdicts(sid) if v["action"] in ("allow", "nudge", "block")]
        assert len(judged) <= calls  # never judged twice (allowed calls may have no verdict row)


def test_verdicts_across_a_killed_daemon_are_an_uninterrupted_runs(kept: Harness, tmp_path: Path) -> None:
    """A deterministic agent's verdicts, one daemon killed while it runs, equal those of a run with none killed:
    a repeated call counts across the restart."""
    calls = 120
    whole, broken = tmp_path / "whole.txt", tmp_path / "broken.txt"
    sets = ("repetition.max_blocks=1000",)  # blocks come at the same calls of every run, none ends it
    first = kept.launch(PY, VERDICT_LOG, str(calls), str(whole), sets=sets)
    ended(kept, [first])
    second = kept.launch(PY, VERDICT_LOG, str(calls), str(broken), "--pace", "0.02", sets=sets)
    wait_for(lambda: broken.exists() and len(broken.read_text().splitlines()) >= calls // 3, 60, "a third of it")
    assert kept.daemon is not None
    old = kept.daemon.pid
    os.kill(old, signal.SIGKILL)
    kept.daemon.wait()
    other_daemon(kept, old)
    ended(kept, [second])
    assert broken.read_text() == whole.read_text()
    assert len(whole.read_text().splitlines()) == calls
    assert " block " in whole.read_text()  # the repetition guard spoke (its count must carry across)


def every_event(harness: Harness, sid: str) -> list[dict[str, Any]]:
    """The session's whole stored history of events, page after page (a writer slowed by a busy machine writes
    more than one page before it is released)."""
    events: list[dict[str, Any]] = []
    cursors: dict[str, Any] = {}
    while True:
        page = harness.request("logs", session=sid, tables=["events"], **cursors)
        events += page["events"]
        if not page["more"]:
            return events
        cursors = page["next"]


@pytest.mark.timeout(900)  # 200 agents started, restarted across and ended: minutes on a loaded machine
def test_restart_daemon_loses_no_event_and_hands_over_an_open_gate(kept: Harness, tmp_path: Path) -> None:
    """restart-daemon with 200 live sessions, 199 writing and one waiting on a gate: every event each agent wrote
    is stored once, and the gate is still open after it, and can be approved."""
    from tests.support.scenarios import opened_gate

    gate = opened_gate(kept)
    sid, gate_id = gate.split(":")
    release = tmp_path / "release"  # the writers write until it exists, however long starting them all takes
    writers = [kept.launch(PY, FLOOD, "--rate", "20", "--tick", "0.05", "--until", str(release)) for _ in range(199)]
    wait_for(lambda: all(s["state"] == "running" for s in kept.request("list") if s["id"] in writers), 600,
             "every writer running", every=0.2)
    old = kept.request("ping")["pid"]
    done = kept.cli("restart-daemon", "--yes", timeout=300)
    assert done.returncode == 0, done.stderr
    assert "200 kept sessions taken up" in done.stdout
    assert kept.request("ping")["pid"] != old
    release.touch()
    ended(kept, writers, timeout=600)
    for writer in writers:
        events = every_event(kept, writer)
        written = int(next(e for e in events if e["kind"] == "done")["data"]["summary"].split()[0]) + 2
        seqs = [e["seq"] for e in events if e["kind"] != "log"]
        assert seqs == list(range(1, written + 1))  # every line once, in order: none lost, none twice
    snap = kept.wait_state(sid, "gated")
    assert gate_id in snap["pending_gates"]
    approved = kept.cli("approve", gate)
    assert approved.returncode == 0, approved.stderr
    kept.wait_state(sid, "running", "exited", "terminated")


def test_keeping_is_on_by_default_and_off_starts_no_keeper(lw: Harness, tmp_path: Path) -> None:
    """A daemon keeps its agents unless told not to; told not to, no keeper is started, and `status` says
    nothing of one."""
    keeper = lw.request("ping")["keeper"]
    assert keeper["keep_agents"] is True and keeper["output_connection"] is True  # (this keeper offers one)
    with Harness(tmp_path / "unkept").not_keeping() as unkept:
        assert unkept.request("ping")["keeper"] is None
        assert not (unkept.paths.runtime / "keeper.sock").exists()
        assert "keeper" not in unkept.cli("status").stdout


def test_status_shows_the_keeper_and_what_taking_sessions_up_cost(kept: Harness, tmp_path: Path) -> None:
    out = tmp_path / "v.txt"
    sid = kept.launch(PY, VERDICT_LOG, "400", str(out), "--pace", "0.01", sets=("repetition.max_blocks=1000",))
    wait_for(lambda: out.exists() and len(out.read_text().splitlines()) >= 20, 60, "20 verdicts")
    assert kept.daemon is not None
    old = kept.daemon.pid
    os.kill(old, signal.SIGKILL)
    kept.daemon.wait()
    other_daemon(kept, old)
    keeper = wait_for(lambda: (k := kept.request("ping")["keeper"])["taken_up"] and k, 30, "the session taken up")
    assert keeper["taken_up"] == 1 and keeper["lost_bytes"] == 0
    said = kept.cli("status").stdout
    assert f"keeper pid {keeper['pid']}, holding 1 agents (new agents are kept); took up 1 sessions at start" in said
    kept.request("kill", session=sid)
    ended(kept, [sid])


def test_an_attached_run_follows_its_kept_session_across_a_killed_daemon(kept: Harness) -> None:
    """`loopwarden run` (attached) while its daemon is SIGKILLed: it says the daemon was replaced, follows the
    session on the next one, prints each record once, and exits with the agent's own code."""
    run, snap = kept.attached("steady", PY, FLOOD, "--rate", "20", "--tick", "0.05", "--seconds", "8")
    wait_for(lambda: kept.status(snap["id"])["tool_calls"] >= 5, 60, "a few calls")
    assert kept.daemon is not None
    old = kept.daemon.pid
    os.kill(old, signal.SIGKILL)
    kept.daemon.wait()
    other_daemon(kept, old)
    out, err = run.communicate(timeout=120)
    said = err.decode()
    assert run.returncode == 0, said
    assert f"the daemon was replaced; following session {snap['id']} again" in said
    assert "lost" not in said
    calls = [line for line in out.decode().splitlines() if "→" in line]
    assert len(calls) == len(set(calls)) == len(tool_calls(kept, snap["id"]))  # each printed once



def test_a_keeper_without_an_output_connection_is_read_a_stream_each(tmp_path: Path) -> None:
    """A keeper an older loopwarden started (still holding agents after an upgrade) offers no output connection:
    the daemon reads each stream on its own connection, and a restart-daemon across it loses and repeats no line."""
    from tests.keeper.wire_client import start_keeper

    harness = Harness(tmp_path)
    harness.paths.runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    keeper = start_keeper(harness.paths.runtime, "--streams-only", "--first-wait", "300")  # until the daemon comes
    try:
        with harness:
            assert harness.request("ping")["keeper"]["output_connection"] is False
            writers = [harness.launch(PY, FLOOD, "--rate", "200", "--tick", "0.01", "--seconds", "4")
                       for _ in range(3)]
            wait_for(lambda: all(len(harness.events(w)) > 50 for w in writers), 60, "events from every writer")
            done = harness.cli("restart-daemon", "--yes")
            assert done.returncode == 0, done.stderr
            assert harness.request("ping")["keeper"]["output_connection"] is False
            ended(harness, writers)
            for writer in writers:
                events = harness.events(writer)
                written = int(next(e for e in events if e["kind"] == "done")["data"]["summary"].split()[0]) + 2
                assert [e["seq"] for e in events if e["kind"] != "log"] == list(range(1, written + 1))
        harness.cli("stop-daemon", "--yes")
    finally:
        if keeper.poll() is None:
            keeper.kill()
        keeper.wait(10)
