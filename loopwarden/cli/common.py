"""Pieces every command shares: one-line errors, config options, the daemon connection."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ..runtime.client import Client, DaemonError, DaemonTimeout
from ..paths import Paths, SocketPathTooLong, default_paths
from ..runtime.doors import operator_refusal
from ..runtime.hosts import HostError, hosts_file
from ..runtime.principal import env_refusal, operator_op
from ..supervisor.visible import visible
from .remote import chosen, closed_early, remote_client, route

if TYPE_CHECKING:
    from ..supervisor.config import Config

# exit codes of loopwarden's own errors (docs/cli.md, "Exit codes"); a session's own are in verdicts.Termination
EXIT_USAGE = 2  # what was asked is wrong: usage, a bad value, an unknown or ambiguous session, an ended one
EXIT_DAEMON = 3  # the daemon: not running (read-only commands start none), unreachable, or cannot do it now
EXIT_REFUSED = 4  # refused: an operator action from inside a supervised session
STOP_WAIT = 15.0  # stop-daemon waits this long for the daemon to exit (its own cap is 10 s)


class Fail(click.ClickException):
    """A one-line error with exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        # daemon errors quote what agents and people sent (session names, gate refs): never a control code
        click.echo(f"loopwarden: error: {visible(self.format_message())}", err=True)


class DaemonFail(Fail):
    exit_code = EXIT_DAEMON


class Unresponsive(DaemonFail):
    """The daemon did not answer within its bound (stopped, stuck): nothing more will come on that link."""


class Refused(Fail):
    exit_code = EXIT_REFUSED


_LOCAL_REF = re.compile(r"s\d+(:g\d+)?")  # a session or gate of one daemon: s3, s3:g1


def _unknown_host_hint(op: str, fields: dict[str, Any]) -> str | None:
    """For `box:s3:g1` copied from a console that watches box, when box is not in the hosts file: how to reach it."""
    if chosen():
        return None
    ref = next((fields[k] for k in ("gate", "session") if isinstance(fields.get(k), str)), "")
    host, sep, rest = ref.partition(":")
    if not sep or not _LOCAL_REF.fullmatch(rest):
        return None
    return (f"if {host} is another machine, use 'loopwarden --host {host} {op} {rest}', or add {host} to the "
            f"hosts file ({hosts_file()})")


def failure(exc: DaemonError, hint: str | None = None) -> Fail:
    """A daemon's error as the CLI's, its exit code by whose trouble it is (see DaemonError.kind)."""
    message = f"{exc}; {hint}" if hint else str(exc)
    if isinstance(exc, DaemonTimeout):
        return Unresponsive(message)
    return {"request": Fail, "refused": Refused}.get(exc.kind, DaemonFail)(message)


def _demo_hint(paths: Paths, exc: DaemonError) -> str | None:
    """With no daemon in this profile, a user who just ran the demo is looking for the demo's daemon."""
    if not str(exc).startswith("no daemon is running"):
        return None
    from .demo_home import demo_daemon_hint  # only on this error

    return demo_daemon_hint(paths)


def config_options(func: Any) -> Any:
    """--config, --preset and --set, shared by every command that builds a Config."""
    func = click.option("--set", "sets", metavar="KEY=VALUE", multiple=True,
                        help="Override one setting, e.g. --set limits.max_runtime=30m (repeatable).")(func)
    func = click.option("--preset", type=click.Choice(["conservative", "recommended", "aggressive"]),
                        help="Threshold preset (default: recommended).")(func)
    func = click.option("--config", "config_file", metavar="FILE", type=click.Path(dir_okay=False),
                        help="TOML file with [limits], [repetition], ... sections.")(func)
    return func


def build_config(config_file: str | None, preset: str | None, sets: tuple[str, ...] | list[str]) -> Config:
    from ..supervisor.config import ConfigError, load_config  # its dataclasses: only for commands that build one

    try:
        return load_config(preset=preset, file=config_file, sets=list(sets))
    except ConfigError as exc:
        raise Fail(str(exc)) from None


def config_env() -> dict[str, str]:
    """The LOOPWARDEN_* settings of this shell, passed to the daemon with a run."""
    return {k: v for k, v in os.environ.items() if k.startswith("LOOPWARDEN_")}


def profile_paths() -> Paths:
    """This shell's profile; refused in one line when its socket path is too long to be made."""
    paths = default_paths()
    try:
        paths.socket  # noqa: B018 - the property checks the length
    except SocketPathTooLong as exc:
        raise DaemonFail(str(exc)) from None
    return paths


def connect(autostart: bool = False, name: str = "cli") -> Client:
    """A connection to this profile's daemon. Only commands that act start one (`autostart`): one that
    reads (ls, status, logs, gates, audit) says in one line that none is running. With --host, the
    host's daemon (never started from here; an unreachable host is one line naming it)."""
    try:
        remote = remote_client(name)
    except HostError as exc:
        raise DaemonFail(str(exc)) from None
    if remote is not None:
        return remote
    paths = profile_paths()
    try:
        return Client.connect(paths, autostart=autostart, name=name)
    except DaemonError as exc:  # none running (3), one not accepting (3), a bad LOOPWARDEN_TIMEOUT (2)
        raise failure(exc, _demo_hint(paths, exc)) from None
    except OSError as exc:  # e.g. LOOPWARDEN_HOME is a file, or not writable
        where = os.environ.get("LOOPWARDEN_HOME")
        what = f"LOOPWARDEN_HOME={where}" if where else "the runtime directory"
        raise DaemonFail(f"cannot use {what}: {exc.strerror or exc}"
                         + (f" ({exc.filename})" if getattr(exc, "filename", None) else "")) from None


def operator_connection() -> Client:
    """A connection for an operator action. Inside a supervised session (the environment of launched
    agents says so) no daemon is started, and with none running the action is refused here, in the
    daemon's words; with one running, the daemon refuses it and records the attempt."""
    paths = profile_paths()
    refusal = env_refusal(os.environ, paths.socket, os.getpid())
    if chosen():  # the host's daemon sees only sshd: this machine's daemon judges this process first
        refusal = refusal or operator_refusal(paths)
        if refusal is not None:
            raise Refused(refusal)
    if refusal is None:
        return connect(autostart=True)
    try:
        return connect(autostart=False)
    except DaemonFail:
        raise Refused(refusal) from None


def call(op: str, **fields: Any) -> Any:
    """One request to the daemon (started for an operator action, if needed); errors become one line, a
    warning one more. A session or gate that begins with a host of the hosts file (box:s3) goes there."""
    for key in ("session", "gate"):
        if isinstance(fields.get(key), str):
            fields[key] = route(fields[key])
    with operator_connection() if operator_op(op) else connect() as client:
        try:
            result = client.request(op, **fields)
        except DaemonError as exc:
            gone = closed_early(exc)  # through a host: its daemon is not running
            if not gone and exc.kind == "request" and (hint := _unknown_host_hint(op, fields)):
                raise Fail(f"{exc}; {hint}") from None
            raise (DaemonFail(gone) if gone else failure(exc)) from None
    if isinstance(result, dict) and result.get("warning"):
        click.echo(click.style(f"loopwarden: warning: {visible(str(result['warning']))}", fg="yellow"), err=True)
    return result


def shutdown_daemon(note: str | None = None,
                    confirm: Callable[[list[dict[str, Any]]], None] | None = None) -> int | None:
    """Stop the running daemon and return once it has exited (so its socket and lock are free): how many
    live sessions stopped with it, or None when none runs. `confirm` is asked first with the live
    sessions, if any; it raises to keep the daemon running."""
    paths = profile_paths()
    try:
        client = connect(autostart=False)
    except Unresponsive:
        raise  # one is running, but does not accept: not "no daemon is running"
    except DaemonFail:
        refusal = env_refusal(os.environ, paths.socket, os.getpid())
        if refusal:  # inside a supervised session, stop-daemon is refused even with nothing to stop
            raise Refused(refusal) from None
        return None
    with client:
        try:  # with `confirm`, the daemon stops only when no session is live; else it names them to ask about
            result = client.request("shutdown", note=note, unless_live=confirm is not None)
            if confirm is not None and not result.get("stopping"):
                confirm(result["live"])
                result = client.request("shutdown", note=note)
        except DaemonError as exc:
            raise failure(exc) from None
    wait_gone(result.get("pid"), paths)
    return int(result["sessions"])


def wait_gone(pid: Any, paths: Paths) -> None:
    """Wait until the daemon `pid` has exited (its lock and socket go with it), at most STOP_WAIT seconds."""
    if not isinstance(pid, int):
        return
    import psutil  # only stop-daemon and demo wait for a daemon: the other commands skip its import

    try:
        daemon = psutil.Process(pid)
    except psutil.Error:
        return
    deadline = time.monotonic() + STOP_WAIT
    while time.monotonic() < deadline:
        try:
            if daemon.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:  # also when the pid now names another process: is_running() checks
            return
        if not daemon.is_running():
            return
        time.sleep(0.05)
    raise DaemonFail(f"the daemon (pid {pid}) is still running {STOP_WAIT:g}s after it was asked to stop; "
                     f"see {paths.daemon_log}, or end it with: kill -9 {pid}")


def listed(sessions: list[dict[str, Any]], most: int = 5) -> str:
    """Sessions named for a question: `s3 (fixer), s4 (docs)`, the first `most` of them, then how many more."""
    names = ", ".join(f"{s.get('id')} ({visible(str(s.get('name')))})" for s in sessions[:most])
    return names + (f" and {len(sessions) - most} more" if len(sessions) > most else "")


def ask_first(question: str, refusal: str) -> None:
    """Ask `question` on the terminal (a no aborts, exit 130); with no terminal to ask on, refuse with `refusal`."""
    if not sys.stdin.isatty():
        raise Fail(refusal)
    click.confirm(question, abort=True, err=True)
