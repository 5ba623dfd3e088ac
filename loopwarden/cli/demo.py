"""`loopwarden demo`: the console on an isolated daemon running every bundled scenario."""

from __future__ import annotations

import os
from pathlib import Path

import click

from typing import Any

from ..sessions.demo import DEMO_AGENTS, demo_specs
from ..runtime.client import Client, DaemonError
from ..paths import HOME_ENV
from ..supervisor.verdicts import FINAL_STATES
from .common import DaemonFail, shutdown_daemon
from .demo_home import demo_home, demo_paths
from .offline import replay_demo


MAX_SPEED = 100.0  # faster, the stretched limits shrink to milliseconds and the story is a blur


def _speed(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not 0 < value <= MAX_SPEED:
        raise click.BadParameter(f"must be more than 0 and at most {MAX_SPEED:g}")
    return value


@click.command()
@click.option("--again", is_flag=True, help="Launch a new round of demo sessions even if some are still live.")
@click.option("--stop", is_flag=True, help="Stop the demo daemon and its sessions, then exit.")
@click.option("--no-console", is_flag=True, help="Launch the sessions and list them; do not open the console.")
@click.option("--read-only", is_flag=True, help="Open the console watch-only.")
@click.option("--speed", type=float, default=1.0, show_default=True, callback=_speed,
              help="Play the new round this many times faster (2: half the pauses and limits).")
@click.option("--replay", is_flag=True, help="Instead: replay the bundled example offline and explain each verdict.")
@click.option("--json", "as_json", is_flag=True, help="With --replay: print verdicts as JSON lines.")
@click.pass_context
def demo(ctx: click.Context, again: bool, stop: bool, no_console: bool, read_only: bool, speed: float, replay: bool,
         as_json: bool) -> None:
    """Every behaviour of loopwarden, live, with no API key: the console on the demo daemon.

    The demo has a daemon, database and spill directory of its own (under the
    user data directory, e.g. ~/.local/share/loopwarden/demo), apart from your
    real sessions. It runs the bundled scripted agents, paced like agents at
    work (seconds of thinking before each step) so each plays out over one to
    four minutes: repeated calls, the same error, alternation, malformed
    output, a stall, a huge output, a loop that opens a gate, an agent asking
    for a human, a blocked task, a run that hits its time limit, a healthy
    session.

    Quitting the console leaves them running; `loopwarden demo` again shows
    them as they are, and launches a new round only when none is live. In the
    console, ctrl+r restarts the demo: the live agents stop, a new round starts.

    \b
    Examples:
      loopwarden demo                 open the console (press ? for every key)
      loopwarden demo --again         a fresh round of sessions
      loopwarden demo --no-console    start them and list them; watch later
      loopwarden demo --speed 4       everything four times faster
      loopwarden demo --stop          stop the demo daemon
      loopwarden demo --replay        the offline version: one stream, every verdict explained
    """
    if replay:
        replay_demo(as_json)
        return
    home = demo_home()
    os.environ[HOME_ENV] = str(home)  # the daemon this starts, and everything it runs, use the demo's profile
    paths = demo_paths(home)
    if stop:
        stopped = shutdown_daemon(note="loopwarden demo --stop")  # the demo's daemon: HOME_ENV is set above
        if stopped is None:
            click.echo("the demo daemon is not running")
        else:
            click.echo(f"demo daemon stopped; {stopped} live session(s) stopped with it")
        return
    try:
        with Client.connect(paths, autostart=True, name="cli") as client:
            live = [s for s in client.request("list") if s.get("state") not in FINAL_STATES]
            started = []
            if again or not live:
                started = [client.request("run", spec=spec) for spec in demo_specs(home, speed)]
            elif ctx.get_parameter_source("speed") is click.core.ParameterSource.COMMANDLINE:
                click.echo(f"loopwarden demo: a round is already live at its own speed; --speed {speed:g} plays the "
                           f"next one: 'loopwarden demo --again --speed {speed:g}' starts it now (or ctrl+r in the "
                           "console)", err=True)
                if not no_console:  # the console shows them; --no-console lists them below
                    click.echo(f"loopwarden demo: started {len(started)} sessions "
                               f"({', '.join(s['id'] for s in started)})", err=True)
    except DaemonError as exc:
        raise DaemonFail(f"demo daemon: {exc}") from None
    except OSError as exc:
        raise DaemonFail(f"cannot use the demo directory {home}: {exc.strerror or exc}") from None
    if no_console:
        _print_round(started, live, home, speed)
        return
    from ..widgets.demo_console import DemoConsole

    DemoConsole(paths, read_only=read_only, agents=len(started) or len(live),
                new_round=lambda: demo_specs(home, speed)).run()


def _print_round(started: list[dict[str, Any]], live: list[dict[str, Any]], home: Path, speed: float) -> None:
    """What `demo --no-console` started (or found running), and how to watch and stop it."""
    shows = {agent.scenario: agent.describe(speed) for agent in DEMO_AGENTS}
    sessions = started or live
    if started:
        click.echo(f"started {len(started)} scripted agents on the demo daemon (its files: {home}):")
    else:
        click.echo(f"the demo is already running, {len(live)} live session(s) (--again starts a new round):")
    for snap in sessions:
        name = str(snap.get("name"))
        click.echo(f"  {snap['id']:<5} {name:<14} {shows.get(name, '')}".rstrip())
    click.echo("watch them:  loopwarden demo           (the console; ? lists every key, ctrl+r restarts the demo)")
    click.echo(f"or:          LOOPWARDEN_HOME={home} loopwarden status")
    click.echo("stop them:   loopwarden demo --stop")
