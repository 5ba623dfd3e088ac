"""`loopwarden web`: the console in a browser, behind a token (the server is in loopwarden/web/)."""

from __future__ import annotations

import errno
import socket
import sys

import click

from ..web.addresses import loopback
from ..web.token import TokenError, load_token, token_path
from .common import DaemonFail, Fail, profile_paths

DEFAULT_PORT = 8765


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Only loopback is private; any other address is reachable by others "
                   "over plain HTTP (a warning says so): prefer an SSH tunnel.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free one, printed).")
@click.option("--read-only", is_flag=True,
              help="Serve a watch-only console: no action keys, and the daemon refuses it every action.")
@click.option("--new-token", is_flag=True, help="Replace the stored token (the old address stops working).")
@click.option("--show-token", is_flag=True,
              help="Print the address with the stored token (it is printed by itself only when it is new).")
def web(host: str, port: int, read_only: bool, new_token: bool, show_token: bool) -> None:
    """Serve the live console to a browser, behind a token.

    Each browser tab gets its own console, the same as `loopwarden console`: the
    sessions, the gates queue and the same keys (g gates, a approve, y confirm,
    ? help). Its actions go to the audit log as the web's (`loopwarden audit`).

    A token is required for every connection, the websocket included. It is
    made once, kept 0600 in the profile's data directory and reused (the
    option --new-token replaces it). The address to open, with the token, is
    printed when the token is new (or with --show-token); otherwise the
    address alone, and where the token is. The browser exchanges the token for
    a cookie valid until the server stops. Listens on 127.0.0.1 only, unless
    --host says otherwise.
    From a phone or another machine, forward the port over SSH rather than
    opening it, then open the printed address there:

    \b
      ssh -L 8765:127.0.0.1:8765 you@this-machine

    Ctrl-C stops the server and every console it serves.

    \b
    Examples:
      loopwarden web
      loopwarden web --read-only --port 8766
      loopwarden web --show-token
      loopwarden web --new-token
    """
    paths = profile_paths()
    _check_host(host)
    try:
        token, made = load_token(paths, new=new_token)
    except TokenError as exc:
        raise DaemonFail(str(exc)) from None
    try:
        from ..web.server import serve
    except ImportError as exc:
        raise Fail(f"the web console needs textual-serve ({exc}): pip install textual-serve") from None
    argv = [sys.executable, "-m", "loopwarden", "console", "--web", *(["--read-only"] if read_only else [])]
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host  # "every address": open it by name
    where = f"[{shown}]" if ":" in shown else shown

    def started(bound: int) -> None:
        if not loopback(host):
            click.echo(click.style(f"loopwarden: warning: listening on {host}, reachable from other machines over "
                                   "plain HTTP: whoever sees the token can act on your sessions; prefer the "
                                   "default 127.0.0.1 and an SSH tunnel", fg="yellow"), err=True)
        kind = "read-only console" if read_only else "console"
        click.echo(f"loopwarden web: serving the {kind} on http://{where}:{bound}/ ; Ctrl-C stops", err=True)
        address = f"http://{where}:{bound}/"
        if made or show_token:
            click.echo(f"  {'a new' if made else 'the'} token, kept in {token_path(paths)} (0600); "
                       f"--new-token replaces it", err=True)
            click.echo(f"{address}?token={token}")  # stdout: the one line to open or pipe
            return
        click.echo(f"  the token is kept in {token_path(paths)} (0600); --show-token prints the address "
                   "with it", err=True)
        click.echo(address)  # stdout: the address alone, so the token is not in every terminal's scrollback

    try:
        ended = serve(argv, token, host=host, port=port, title="loopwarden" + (" (read-only)" if read_only else ""),
                      paths=paths, started=started)
    except OSError as exc:
        raise Fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                   f"{'; --port 0 picks a free port' if exc.errno == errno.EADDRINUSE else ''}") from None
    click.echo(f"loopwarden web: stopped ({ended} browser console{'' if ended == 1 else 's'} closed)", err=True)


def _check_host(host: str) -> None:
    """A host that is no address and resolves to none: one line, before anything starts."""
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Fail(f"--host {host!r} is not an address of this machine ({getattr(exc, 'strerror', None) or exc})"
                   ) from None

