"""How each session an earlier daemon left running ended, and what is known of the events it may have
written that no one judged.

A daemon that starts marks those sessions lost (store.mark_lost), then reads the report each earlier
daemon's guardian left (guardian_report.py) and says of each session, in its termination_text (`status`,
`explain`, the console) and as data in the store's `sessions.lost` (`lost` in its snapshot):

* killed by the guardian when the daemon died at T: the processes it found, when it sent SIGTERM (and
  SIGKILL to how many), whether anything survived;
* found gone by the guardian (its process had exited before the daemon died);
* without a report (the guardian died too, the machine restarted, or the session was adopted or attached,
  which no guardian stops): still running? when a process has its pid, else found gone;

and, of events: its last stored event (seq, time) and the seconds between it and the kill (or the daemon's
death), and the bytes its agent wrote to stdout that the daemon never read, when the guardian could see
them in the pipe. A guardian still at work is waited for (at most PENDING_WAIT) and its sessions are said
again once it is done. A report is removed once settled.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..supervisor.visible import visible
from . import guardian_report
from .pods.left_behind import pod_of
from .procfs import ProcId, alive, read_stat
from .store import Store

PENDING_WAIT = 30.0  # seconds to wait for an earlier guardian still at work
POLL_SECONDS = 0.2  # only where the kernel has no pidfd


@dataclass
class Settled:
    """What `settle` could not say yet: sessions whose guardian is still at work, and those guardians."""

    sessions: list[str] = field(default_factory=list)
    guardians: list[ProcId] = field(default_factory=list)


def settle(store: Store, sids: list[str], directory: str, own: str = "") -> Settled:
    """Say how each of `sids` (lost) ended, from the guardians' reports in `directory` (but daemon `own`'s):
    in the store; the reports settled are removed. Runs in a worker thread. Raises StoreError."""
    reports = guardian_report.read_all(directory, skip=own)
    working = [r for r in reports if r.get("state") != "done" and alive(_guardian(r))]
    covered = {sid: r for r in reports for sid in r["sessions"]}
    left = Settled(guardians=[_guardian(r) for r in working])
    for sid in sids:
        row = store.session(sid) or {}
        pod = pod_of(row)
        if pod is not None:  # no guardian of this machine tells of it
            record_in_pod(store, sid, pod)
            continue
        report = covered.get(sid)
        waiting = any(report is r for r in working) or (report is None and bool(working))
        if waiting:
            left.sessions.append(sid)
        last = store.last("events", sid, 1)
        details = describe(sid, report, row.get("pid"), last[0] if last else None, waiting)
        store.record_lost(sid, words(details), details, details.get("daemon_died_at"))
    for report in reports:
        if not any(report is r for r in working):
            guardian_report.remove(str(report["path"]))
    return left


def _guardian(report: dict[str, Any]) -> ProcId:
    g = report.get("guardian")
    if not isinstance(g, dict):
        g = {}
    return ProcId(_int(g.get("pid")) or 0, _int(g.get("start")) or 0)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def describe(sid: str, report: dict[str, Any] | None, pid: Any, last: dict[str, Any] | None,
             waiting: bool) -> dict[str, Any]:
    """How a lost session ended, as data: `how` (guardian, gone, running, pending) and what is known."""
    entry = report["sessions"].get(sid) if report else None
    out: dict[str, Any] = {"how": "pending"} if waiting else {}
    if report is not None and isinstance(entry, dict):
        out.update(daemon=report.get("daemon"), daemon_died_at=_time(report.get("daemon_died_at")))
        processes = _int(entry.get("processes")) or 0
        pids = entry.get("pids")
        out.update(processes=processes, pids=[p for p in pids if _int(p)][:32] if isinstance(pids, list) else [],
                   unread_stdout=_int(entry.get("unread_stdout")), survivors=_int(entry.get("survivors")))
        if processes:
            out.update(term_at=_time(report.get("term_at")), kill_at=_time(report.get("kill_at")),
                       sigkill=_int(entry.get("sigkill")))
        out.setdefault("how", "guardian" if processes else "gone")
    elif not waiting:
        out["pid"] = _int(pid)
        out["pid_alive"] = bool(out["pid"]) and _running(out["pid"])
        out["how"] = "running" if out["pid_alive"] else "gone"
    if last is not None:
        out["last_event"] = {"seq": _int(last.get("seq")), "ts": _time(last.get("ts"))}
        end = out.get("term_at") or out.get("daemon_died_at")
        ts = out["last_event"]["ts"]
        if end is not None and ts is not None:
            out["unjudged_window"] = round(max(0.0, end - ts), 3)
    else:
        out["last_event"] = None
    return out


def record_in_pod(store: Store, sid: str, pod: dict[str, Any], why: str | None = None) -> None:
    """How a lost session that ran in `pod` ended (`why` the next daemon could not take it up), in the store.
    Runs in a worker thread. Raises StoreError."""
    last = store.last("events", sid, 1)
    details = in_pod(pod, last[0] if last else None, why)
    store.record_lost(sid, words(details), details)


def in_pod(pod: dict[str, Any], last: dict[str, Any] | None, why: str | None = None) -> dict[str, Any]:
    """A session that ran in a pod when its daemon died, which the next daemon could not take up (`why`): no
    guardian and no pid of this machine tells of it (the next daemon deletes its pod: pods/left_behind.py)."""
    out: dict[str, Any] = {"how": "pod", "pod": visible(str(pod.get("pod")))[:80],
                           "node": visible(str(pod.get("node") or "?"))[:80]}
    if why:
        out["why"] = visible(why)[:240]
    out["last_event"] = {"seq": _int(last.get("seq")), "ts": _time(last.get("ts"))} if last is not None else None
    return out


def _running(pid: int) -> bool:
    info = read_stat(pid)
    return info is not None and not info.zombie


def _at(ts: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) else "?"


def words(d: dict[str, Any]) -> str:
    """The sentence for a lost session's termination_text."""
    how = d.get("how")
    died = _at(d.get("daemon_died_at"))
    if how == "guardian":
        n = d.get("processes") or 0
        text = (f"killed by the guardian when the daemon died at {died}: SIGTERM to {n} process"
                f"{'' if n == 1 else 'es'} at {_at(d.get('term_at'))}")
        if d.get("sigkill"):
            text += f", SIGKILL to {d['sigkill']} at {_at(d.get('kill_at'))}"
        survivors = d.get("survivors")
        text += ("; the guardian did not finish (it died too)" if survivors is None else
                 "; nothing survived" if survivors == 0 else f"; {survivors} survived")
    elif how == "gone" and d.get("daemon_died_at") is not None:
        text = f"found gone by the guardian when the daemon died at {died} (its process had exited)"
    elif how == "gone":
        text = "found gone when the next daemon started (not seen by the guardian)"
    elif how == "pod":
        text = (f"its daemon died while its agent ran in pod {d.get('pod')} on node {d.get('node')}"
                + (f", and the next daemon could not take it up: {d['why']}" if d.get("why") else "")
                + "; its pod is deleted ('loopwarden continue' takes the conversation up in a new one)")
    elif how == "running":
        text = f"still running? (not seen by the guardian; a process with its pid {d.get('pid')} exists)"
    else:
        text = "its daemon died; the guardian is still stopping what it started"
    return text + "; " + _events(d)


def _events(d: dict[str, Any]) -> str:
    """What is known of the events it may have written that were never judged."""
    last = d.get("last_event")
    if last:
        text = f"its last stored event: #{last.get('seq')} at {_at(last.get('ts'))}"
        if d.get("unjudged_window") is not None:
            before = "it was killed" if d.get("how") == "guardian" else "the daemon died"
            text += f", {d['unjudged_window']:.1f}s before {before}"
    else:
        text = "no event of it was stored"
    unread = d.get("unread_stdout")
    if unread:
        text += f"; {unread:,} bytes it wrote to stdout were never read"
    elif unread == 0:
        text += "; nothing it wrote to stdout was left unread"
    return text


async def gone(proc: ProcId) -> None:
    """Return once this very process has exited."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        while alive(proc):  # noqa: ASYNC110 - without a pidfd, polling is all there is
            await anyio.sleep(POLL_SECONDS)
        return
    try:
        if alive(proc):  # the pidfd names the process that has the pid now: it is the guardian
            await anyio.wait_readable(fd)
    finally:
        os.close(fd)
