"""Serving the console to browsers: textual-serve's Server behind a token, one console process per browser.

textual-serve (aiohttp) runs a command per websocket and relays the terminal to xterm.js in the page. The
command is `loopwarden console --web`: the same console as in a terminal, whose actions the daemon audits
as the web's. What is added here, by subclassing rather than forking textual-serve:

* a token on every request (the page, its assets, downloads and above all the websocket), compared in
  constant time; the token is taken only from the address (`?token=`): the page's is exchanged for an
  HttpOnly, SameSite=Strict cookie holding a random session value of this server run, kept in memory
  (cookies go to every port of the host, so the token itself is never one, and a leaked cookie dies with
  the server), and leaves the address bar; a refused websocket never reaches the handler, so no console
  process starts for it;
* a websocket from another origin is refused (the cookie alone would not stop a page on another site
  that knows the address from trying), and so is one from a supervised agent on this machine, which can
  read the token file (peers.py);
* each console process is started without a shell, in a session of its own, with nothing of the token in
  its argv or environment, and is ended for sure: politely (textual's quit message) when its browser goes,
  then SIGTERM and SIGKILL to its process group if it lingers; all of them when the server stops;
* at most MAX_CONSOLES at once (each is a Python process of some 60 MiB), the slot taken before any await;
* a console's stderr goes to a log file (CONSOLE_LOG, rotated past LOG_BYTES at each start), not into
  textual-serve's unbounded buffer that it prints on our stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shlex
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from ..paths import Paths
from .console import SERVER_ENV
from .peers import refusal as peer_refusal
from .token import token_matches

log = logging.getLogger("loopwarden.web")

COOKIE = "loopwarden_web"
MAX_CONSOLES = 8
CONSOLE_LOG = "web-consoles.log"  # in the profile's data directory
LOG_BYTES = 1 << 20
QUIT_SECONDS = 3.0  # a console asked to quit has this long before it is sent SIGTERM ...
TERM_SECONDS = 2.0  # ... and this long more before SIGKILL
SHUTDOWN_SECONDS = 5.0  # aiohttp's wait for handlers still running once the consoles are closed
HARDENING = {
    "Referrer-Policy": "no-referrer",  # the token never leaves in a Referer (the page loads a web font)
    "X-Frame-Options": "DENY",  # no other site may frame the console and steer clicks into it
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    # nothing from elsewhere: textual-serve's page asks Google for a web font (the local one is used instead)
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
                               "'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConsoleProcess(AppService):
    """One browser's console: textual-serve's AppService, started from an argv (no shell) and ended for sure."""

    def __init__(self, argv: Sequence[str], log_path: Path, **kwargs: Any) -> None:
        super().__init__(shlex.join(argv), **kwargs)
        self.argv = list(argv)
        self.log_path = log_path

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        pipe = asyncio.subprocess.PIPE
        env = {**self._build_environment(width, height), SERVER_ENV: str(os.getpid())}  # watched by the console
        with _console_log(self.log_path) as log_file:
            self._process = process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=pipe, stdout=pipe, stderr=log_file, env=env,
                start_new_session=True)  # its own process group: ended as one, and Ctrl-C in our terminal is ours
        # textual-serve reads the console's stderr into memory until it ends: give it one that has ended
        process.stderr = asyncio.StreamReader()
        process.stderr.feed_eof()
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def stop(self) -> None:
        """Ask the console to quit; end its process group if it has not within QUIT_SECONDS."""
        try:
            await asyncio.wait_for(super().stop(), QUIT_SECONDS)
        except (TimeoutError, OSError):
            pass
        finally:
            await self._end()

    async def _end(self) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        for sig, wait in ((signal.SIGTERM, TERM_SECONDS), (signal.SIGKILL, TERM_SECONDS)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            try:
                await asyncio.wait_for(process.wait(), wait)
                return
            except TimeoutError:
                continue


class WebConsole(Server):
    """textual-serve's Server for `argv`, every request checked against `token`."""

    def __init__(self, argv: Sequence[str], token: str, *, host: str, port: int, title: str, paths: Paths) -> None:
        super().__init__(shlex.join(argv), host=host, port=port, title=title)
        self.paths = paths
        self.argv = list(argv)
        self.token = token
        self.session = secrets.token_urlsafe(32)  # the cookie's value: this run only, never written anywhere
        self.log_path = paths.data / CONSOLE_LOG
        self.consoles: set[ConsoleProcess] = set()
        self.sockets: set[web.WebSocketResponse] = set()
        self.closing = False

    # ---- the token ---------------------------------------------------------------
    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self.guard)
        return app

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Refuse a request without the token in its address or this run's session cookie (401), or with
        another (403); exchange a page's token for the session cookie."""
        in_query = request.query.get("token")
        cookie = request.cookies.get(COOKIE)
        if not in_query and not cookie:
            return _refusal(401, "a token is required: open the address with the token (http://HOST:PORT/?token=...;"
                                 " `loopwarden web --show-token` prints it)")
        if not (token_matches(in_query, self.token) if in_query else token_matches(cookie, self.session)):
            return _refusal(403, "wrong token" if in_query else "this session has ended: open the address "
                                                                "with the token again")
        if request.path == "/ws" and not _same_origin(request):
            return _refusal(403, "a websocket from another origin")
        transport = request.transport
        ends = (transport.get_extra_info("peername"), transport.get_extra_info("sockname")) if transport else ()
        why = await asyncio.to_thread(peer_refusal, self.paths, *ends) if ends else "refused: a closed connection"
        if why:  # an agent that read the token file: no page, no console
            log.warning("loopwarden web: refused %s to %s", "a console" if request.path == "/ws" else request.path,
                        why)
            return _refusal(403, why)
        if in_query is not None and request.path == "/" and request.method == "GET":
            rest = [(k, v) for k, v in request.query.items() if k != "token"]
            moved = web.Response(status=302, headers={**HARDENING,
                                                      "Location": "/" + ("?" + urlencode(rest) if rest else "")})
            moved.set_cookie(COOKIE, self.session, httponly=True, samesite="Strict", path="/")
            return moved
        response = await handler(request)
        if not response.prepared:  # a websocket's headers went out when it opened
            response.headers.update(HARDENING)
        return response

    # ---- pages and consoles ----------------------------------------------------
    async def on_startup(self, app: web.Application) -> None:
        """Quiet: `loopwarden web` prints its own lines (textual-serve prints a logo and its address here)."""

    async def handle_index(self, request: web.Request) -> Any:
        # the page's websocket and asset URLs name the address the browser used (an SSH tunnel's local port,
        # localhost or 127.0.0.1), so the cookie set for it goes with them; nothing is awaited in between
        self.public_url = f"{request.scheme}://{request.host}"
        return await super().handle_index(request)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's handler, with a ConsoleProcess that is tracked, bounded and always ended."""
        if self.closing:
            raise web.HTTPServiceUnavailable(text="loopwarden web is stopping")
        if len(self.consoles) >= MAX_CONSOLES:
            raise web.HTTPServiceUnavailable(text=f"{MAX_CONSOLES} consoles are open already; close one first")
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        # the slot is taken before the first await, so browsers connecting at once cannot pass MAX_CONSOLES
        console = ConsoleProcess(self.argv, self.log_path, write_bytes=websocket.send_bytes,
                                 write_str=websocket.send_str, close=websocket.close,
                                 download_manager=self.download_manager)
        self.consoles.add(console)
        self.sockets.add(websocket)
        try:
            await websocket.prepare(request)
            await console.start(max(2, min(width, 1000)), max(2, min(height, 500)))
            await self._process_messages(websocket, console)
        except (ValueError, TypeError, KeyError, IndexError, AssertionError) as exc:
            log.warning("loopwarden web: a browser sent a message of another shape (%s); its console is closed",
                        type(exc).__name__)
        except (ConnectionError, OSError) as exc:
            log.warning("loopwarden web: a console could not run: %s", exc)
        finally:
            await asyncio.shield(self._close(console))
            self.sockets.discard(websocket)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await websocket.close()
        return websocket

    async def _close(self, console: ConsoleProcess) -> None:
        try:
            await console.stop()
        finally:
            self.consoles.discard(console)

    async def close_all(self) -> int:
        """Stop taking consoles, end every console and close every browser's websocket; how many were open."""
        self.closing = True
        open_now = list(self.consoles)
        await asyncio.gather(*(self._close(c) for c in open_now), return_exceptions=True)
        for websocket in list(self.sockets):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await websocket.close(code=1001, message=b"loopwarden web stopped")
        return len(open_now)

    async def run(self, started: Callable[[int], None], stop: asyncio.Event) -> int:
        """Serve until `stop` is set: `started(port)` once listening (OSError when it cannot listen);
        returns how many consoles were open at the end, all ended."""
        runner = web.AppRunner(await self._make_app(), handle_signals=False, shutdown_timeout=SHUTDOWN_SECONDS)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or []
            started(sockets[0].getsockname()[1] if sockets else self.port)
            await stop.wait()
            return await self.close_all()
        finally:
            await runner.cleanup()


@contextlib.contextmanager
def _console_log(path: Path) -> Iterator[Any]:
    """The consoles' shared stderr log, appended to; moved to NAME.1 once past LOG_BYTES (memory and disk bounded)."""
    with contextlib.suppress(OSError):
        if path.stat().st_size > LOG_BYTES:
            path.replace(path.with_name(path.name + ".1"))
    try:
        log_file = open(path, "ab")  # noqa: SIM115 - closed below, once the child has its own copy
    except OSError:
        yield asyncio.subprocess.DEVNULL
        return
    with log_file:
        yield log_file


def _same_origin(request: web.Request) -> bool:
    """Whether a websocket comes from the page we served (browsers always send Origin; other clients
    that send none are let through, as they hold the token anyway)."""
    origin = request.headers.get("Origin")
    return origin is None or urlsplit(origin).netloc == request.host


def _refusal(status: int, why: str) -> web.Response:
    return web.Response(status=status, text=f"loopwarden web: {why}\n", headers=HARDENING)


def serve(argv: Sequence[str], token: str, *, host: str, port: int, title: str, paths: Paths,
          started: Callable[[int], None]) -> int:
    """Run the server until SIGINT or SIGTERM; how many consoles were open then (all ended)."""

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await WebConsole(argv, token, host=host, port=port, title=title, paths=paths).run(started, stop)

    return asyncio.run(main())
