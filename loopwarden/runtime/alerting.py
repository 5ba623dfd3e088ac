"""The daemon's alerts: records that need a person become alerts, sent by the notifier, each in the audit.

Record routing hands this part every gate and verdict record, and every session's first
final snapshot; alerts.py decides what they are, notifier.py sends them. The daemon's notify settings
come from its config file (`Paths.config_file`) and its environment, read at its start and again by
`loopwarden notify test` (the operator changed them and checks them).
"""

from __future__ import annotations

import os
import socket
import stat
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..supervisor.config import ConfigError, Notify, load_config, redact_url
from ..supervisor.visible import visible
from ..paths import Paths
from .alerts import Alert, cli_prefix, ended_alert, gate_alert, stall_alert, test_alert
from .audit import AuditLog
from .notifier import Notifier, scrub
from .principal import Principal
from .registry import SessionRegistry
from .requests import RequestError

ENDINGS_KEPT = 10_000  # sessions whose ending was already alerted on, remembered (a failed store write republishes)


class Alerting:
    """Gates, asks, stalls and abnormal endings to the notifier; its outcomes to the audit."""

    def __init__(self, paths: Paths, registry: SessionRegistry, audit: AuditLog, *, log: Callable[[str], None],
                 clock: Callable[[], float]) -> None:
        self.paths = paths
        self.registry = registry
        self.audit = audit
        self.log = log
        self.clock = clock
        self.notifier = Notifier(self._outcome, clock=clock, log=log)
        self.notifier.host = visible(socket.gethostname())[:80]
        self._ended_seen: OrderedDict[str, None] = OrderedDict()
        self._cli = cli_prefix(os.environ.get("LOOPWARDEN_HOME"))

    def _notify_settings(self) -> Notify:
        """The daemon's [notify] settings (file < environment), or ConfigError."""
        path = self.paths.config_file
        return load_config(file=path if path.exists() else None).notify

    def configure(self) -> str | None:
        """(Re)read the notify settings; the error, if they could not be read (alerts keep the old ones)."""
        try:
            settings = self._notify_settings()
        except ConfigError as exc:
            error = scrub(str(exc), self.notifier.urls)
            self.notifier.config_error = error
            self.log(f"alerts: settings not read ({error})")
            return error
        self.notifier.config_error = None
        self.notifier.config_warning = _open_to_others(self.paths.config_file) if settings.urls else None
        changed = settings.urls != self.notifier.urls
        self.notifier.configure(settings)
        if changed:
            targets = ", ".join(t.label for t in self.notifier.targets) or "none"
            self.log(f"alerts: {len(self.notifier.targets)} notify targets ({targets}), "
                      f"events {','.join(settings.events) or 'none'}")
        return None

    def health(self) -> dict[str, Any] | None:
        """The alert counters for `status` (None when no URL is set and nothing went wrong)."""
        if not self.notifier.targets and self.notifier.config_error is None:
            return None
        return self.notifier.health()

    # ---- from record routing ------------------------------------------------------------------
    def record(self, kind: str, session_id: str, data: dict[str, Any]) -> None:
        """A gate or verdict record: an alert when it is a gate that just opened, or a stall."""
        if (kind == "verdict" and data.get("rule") != "stall") or not self.notifier.targets:
            return  # the common case, first: most verdicts are no alert
        session = self.registry.sessions.get(session_id)
        name = session.spec.name if session is not None else session_id
        link = self.notifier.settings.link
        if kind == "gate":
            alert = gate_alert(session_id, name, self.notifier.host, data, cli=self._cli, link=link)
        else:
            alert = stall_alert(session_id, name, self.notifier.host, data, cli=self._cli, link=link)
        if alert is not None:
            self.notifier.offer(alert)

    def ended(self, snap: dict[str, Any]) -> None:
        """A session's final snapshot (the first time it is published): an alert if it ended abnormally."""
        sid = str(snap.get("id") or "")
        if not self.notifier.targets or sid in self._ended_seen:
            return
        self._ended_seen[sid] = None
        while len(self._ended_seen) > ENDINGS_KEPT:
            self._ended_seen.popitem(last=False)
        alert = ended_alert(snap, self.notifier.host, cli=self._cli, link=self.notifier.settings.link)
        if alert is not None:
            self.notifier.offer(alert)

    def lost(self, lost: list[str]) -> None:
        """Sessions an earlier daemon left running, found lost at this one's start."""
        for sid in lost:
            snap = self.registry.recent.get(sid)
            if snap is not None:
                self.ended(snap)

    # ---- outcomes, to the audit ------------------------------------------------------------------
    def _outcome(self, alert: Alert, target: str, outcome: str) -> None:
        """Every alert sent, failed, deduplicated, rate-limited or dropped: one audit row (per target)."""
        what = f"{alert.kind} {alert.ref}".strip()
        note = f"{target}: {alert.reason}" if target else alert.reason
        self.audit.row(alert.session, {"ts": self.clock(), "actor": "loopwarden", "client": "daemon",
                                       "action": "alert", "target": what[:200], "note": note[:500],
                                       "outcome": outcome[:300]})

    # ---- `loopwarden notify test` ------------------------------------------------------------
    async def op_notify_test(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Read the notify settings again, then send one test alert to every URL: each URL's outcome."""
        error = self.configure()
        if error is not None:
            raise RequestError(f"the notify settings could not be read: {error}")
        if not self.notifier.targets:
            raise RequestError(f"no notify.urls are set: add [notify] urls = [\"ntfys://ntfy.sh/TOPIC\"] to "
                               f"{self.paths.config_file} (or set LOOPWARDEN_NOTIFY_URLS for the daemon), then "
                               "try again")
        self.audit.record(who, None, "notify-test", ", ".join(redact_url(u) for u in self.notifier.urls)[:200], None,
                    "sending")
        results = await self.notifier.test(test_alert(self.notifier.host, self.clock()))
        return {"results": [{"target": t, "ok": e is None, "error": e} for t, e in results],
                "config_file": str(self.paths.config_file)}


def _open_to_others(path: Path) -> str | None:
    """Why the config file, which holds the notify URLs (secrets), should be made private; None when it is."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return f"{path} is readable by others (mode {stat.S_IMODE(mode):04o}) and holds the notify URLs: chmod 600 it"
