"""`loopwarden notify`: alerts off the terminal (the daemon sends them; see runtime/alerting.py)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..supervisor.visible import visible
from .common import Fail, call

NO_URLS = "no notify.urls are set"  # the daemon's words (runtime/alerting.py)
URLS_ENV = "LOOPWARDEN_NOTIFY_URLS"


@click.group()
def notify() -> None:
    """Alerts: where the daemon tells you a session needs you (a gate, an ask, a stall, an abnormal end).

    \b
    The URLs are `notify.urls` in the daemon's config file (LOOPWARDEN_HOME/config.toml, or
    ~/.config/loopwarden/config.toml), any apprise URL: ntfys://ntfy.sh/TOPIC for a phone,
    tgram://BOTTOKEN/CHATID for Telegram, json://HOST:PORT/PATH for a webhook.

    \b
    Example:
      loopwarden notify test
    """


@notify.command("test")
def notify_test() -> None:
    """Send one test alert through every notify URL, as the daemon sends alerts; one line per URL.

    The daemon reads its notify settings again first, so an edited config file is checked as it
    now is. Exits 1 when every URL failed. URLs are shown by number and scheme only (they hold
    secrets).

    \b
    Example: with these lines in ~/.config/loopwarden/config.toml (mode 0600)
      [notify]
      urls = ["ntfys://ntfy.sh/my-private-topic"]
    run
      loopwarden notify test
    """
    try:
        reply = call("notify_test")
    except Fail as exc:
        if NO_URLS in str(exc) and os.environ.get(URLS_ENV):  # set in this shell, not in the daemon's
            raise Fail(f"{URLS_ENV} is set here, but the daemon reads its own environment, from when it started: "
                       f"stop it ('loopwarden stop-daemon') and run 'loopwarden notify test' again from this shell, "
                       f"or put the URLs in its config file") from None
        raise
    results = reply.get("results") or []
    for result in results:
        target = visible(str(result.get("target")))
        if result.get("ok"):
            click.echo(f"{target}: sent")
        else:
            click.echo(click.style(f"{target}: FAILED: {visible(str(result.get('error')))}", fg="red"))
    if results and not any(r.get("ok") for r in results):
        sys.exit(1)


def alerts_lines(info: dict[str, Any]) -> list[tuple[str, bool]]:
    """The daemon's alert counters for `status`, as (line, trouble): nothing when no URL is set."""
    alerts = info.get("alerts")
    if not isinstance(alerts, dict):
        return []
    out: list[tuple[str, bool]] = []
    if alerts.get("config_error"):
        out.append((f"alerts: settings not read: {alerts['config_error']}", True))
    if alerts.get("config_warning"):
        out.append((f"alerts: warning: {alerts['config_warning']}", True))
    targets = alerts.get("targets") or []
    counts = ", ".join(f"{alerts.get(k) or 0} {k.replace('_', '-')}" for k in
                       ("sent", "failed", "deduplicated", "rate_limited", "dropped"))
    events = ",".join(alerts.get("events") or []) or "none"
    out.append((f"alerts: {len(targets)} target{'s' if len(targets) != 1 else ''} "
                f"({', '.join(str(t.get('target')) for t in targets) or 'none'}), events {events}: {counts}",
                bool(alerts.get("failed") or alerts.get("dropped"))))
    if alerts.get("last_error"):
        out.append((f"alerts: last error: {alerts['last_error']}", True))
    return out
