"""`loopwarden restart-daemon`: a new daemon (after an upgrade) takes over the kept agents, none stopped."""

from __future__ import annotations

import time
from typing import Any

import click

from ..runtime.client import DaemonError, daemon_pid, start_daemon
from .common import DaemonFail, Fail, ask_first, connect, failure, listed, profile_paths, wait_gone

START_WAIT = 20.0  # seconds the new daemon has to answer


@click.command("restart-daemon")
@click.option("--yes", "-y", is_flag=True, help="Do not ask, even when sessions that are not kept would stop.")
def restart_daemon(yes: bool) -> None:
    """Replace the daemon with a new one (after 'pip install -U loopwarden'), agents untouched.

    Kept agents (all launched ones, unless daemon.keep_agents = false in the
    config file) are held by the keeper meanwhile, and sessions in pods by the keeper in each pod: the new
    daemon takes each one up where the store ends,
    its judgement rebuilt, with no event lost or judged twice. Sessions that are
    not kept stop, as with stop-daemon; it asks first (--yes does not). Returns
    once the new daemon answers.

    \b
    Examples:
      loopwarden restart-daemon
      loopwarden restart-daemon --yes
    """
    paths = profile_paths()
    try:
        client = connect(autostart=False)
    except DaemonFail:
        client = None
    if client is not None:
        with client:
            try:
                result = client.request("handover", unless_stopping=not yes)
                if not result.get("stopping"):
                    _confirm(result["live"])
                    result = client.request("handover")
            except DaemonError as exc:
                raise failure(exc) from None
        start_daemon(paths, succeed=int(result["pid"]))  # it starts up while the old one stops
        wait_gone(result.get("pid"), paths)
    else:
        start_daemon(paths)
    deadline = time.monotonic() + START_WAIT
    while (pid := daemon_pid(paths)) is None:
        if time.monotonic() > deadline:
            raise Fail(f"the new daemon did not answer within {START_WAIT:g}s; see {paths.daemon_log}")
        time.sleep(0.05)
    if client is None:
        click.echo(f"no daemon was running; daemon {pid} started")
        return
    kept, stopped = int(result.get("kept") or 0), int(result.get("sessions") or 0)
    click.echo(f"daemon {pid} took over from {result.get('pid')}: {kept} kept sessions taken up"
               + (f", {stopped} stopped (not kept)" if stopped else ""))


def _confirm(live: list[dict[str, Any]]) -> None:
    """Ask before sessions that are not kept stop with the old daemon; refuse without a terminal to ask on."""
    said = f"{len(live)} live sessions are not kept and would stop: {listed(live)}"
    ask_first(f"{said}. Restart the daemon?", f"{said}; run 'loopwarden restart-daemon --yes' to restart anyway")
