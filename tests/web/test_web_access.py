"""Who may reach `loopwarden web`: the token on every request (page, assets, websocket), kept 0600, never in a
console's argv or environment; a read-only client refused by the daemon itself; one-line errors."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
from pathlib import Path
from urllib.parse import urlsplit
from typing import Any

import aiohttp
import pytest

from loopwarden.paths import default_paths
from loopwarden.runtime.client import Client, DaemonError
from loopwarden.web.token import load_token, token_matches, token_path
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.processes import gone
from tests.support.waiting import wait_for
from tests.web.web_harness import WebServer, wait_for_children


async def _http(url: str, **kwargs: Any) -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession() as session, \
            session.get(url, allow_redirects=False, **kwargs) as response:
        return response.status, dict(response.headers), await response.text()


async def _websocket_status(url: str, **kwargs: Any) -> int:
    """The HTTP status of a websocket handshake (101 once upgraded)."""
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, **kwargs):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def test_without_the_token_or_with_another_every_request_is_refused_and_no_console_starts(web: WebServer) -> None:
    ws = web.base.replace("http://", "ws://") + "ws"
    wrong = "x" * len(web.token)

    async def attempts() -> dict[str, int]:
        return {
            "page": (await _http(web.base))[0],
            "page, wrong token": (await _http(f"{web.base}?token={wrong}"))[0],
            "asset": (await _http(f"{web.base}static/js/textual.js"))[0],
            "asset, wrong cookie": (await _http(f"{web.base}static/js/textual.js",
                                                cookies={"loopwarden_web": wrong}))[0],
            "websocket": await _websocket_status(ws),
            "websocket, wrong token": await _websocket_status(f"{ws}?token={wrong}"),
            "websocket, wrong cookie": await _websocket_status(ws, headers={"Cookie": f"loopwarden_web={wrong}"}),
            # the token is taken from the address only: not as the cookie (whose value is this run's session),
            # nor as a bearer header
            "websocket, the token as cookie": await _websocket_status(
                ws, headers={"Cookie": f"loopwarden_web={web.token}"}),
            "page, the token as cookie": (await _http(web.base, cookies={"loopwarden_web": web.token}))[0],
            "websocket, bearer": await _websocket_status(ws, headers={"Authorization": f"Bearer {web.token}"}),
            "websocket, empty token": await _websocket_status(f"{ws}?token="),
        }

    statuses = asyncio.run(attempts())
    assert statuses == {"page": 401, "page, wrong token": 403, "asset": 401, "asset, wrong cookie": 403,
                        "websocket": 401, "websocket, wrong token": 403, "websocket, wrong cookie": 403,
                        "websocket, the token as cookie": 403, "page, the token as cookie": 403,
                        "websocket, bearer": 401, "websocket, empty token": 401}
    assert web.consoles() == []  # nothing was started for any of them


def test_the_token_opens_the_page_through_a_strict_cookie_and_a_websocket_from_another_origin_is_refused(
        web: WebServer) -> None:
    async def visit() -> tuple[Any, ...]:
        status, headers, _ = await _http(web.url)
        cookie = headers["Set-Cookie"]
        session = cookie.split("loopwarden_web=")[1].split(";")[0]
        page = await _http(web.base, cookies={"loopwarden_web": session})
        asset = await _http(f"{web.base}static/css/xterm.css", cookies={"loopwarden_web": session})
        foreign = await _websocket_status(web.base.replace("http://", "ws://") + f"ws?token={web.token}",
                                          headers={"Origin": "http://evil.example"})
        return status, headers["Location"], cookie, page, asset[0], foreign

    status, location, cookie, (page_status, page_headers, page), asset, foreign = asyncio.run(visit())
    assert (status, location) == (302, "/")  # the token leaves the address bar
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert web.token not in cookie  # other services on this host get the cookie: it is not the token
    assert page_status == 200 and "data-session-websocket-url" in page and web.token not in page
    assert page_headers["Referrer-Policy"] == "no-referrer" and page_headers["X-Frame-Options"] == "DENY"
    assert "default-src 'self'" in page_headers["Content-Security-Policy"]  # nothing loaded from elsewhere
    assert asset == 200
    assert foreign == 403 and web.consoles() == []


def test_each_websocket_runs_its_own_console_without_the_token_in_sight_and_it_ends_with_the_socket(
        web: WebServer) -> None:
    ws = web.base.replace("http://", "ws://") + f"ws?token={web.token}&width=100&height=30"

    async def attach() -> tuple[list[Any], bytes]:
        async with aiohttp.ClientSession() as session, session.ws_connect(ws) as socket_:
            first = await asyncio.wait_for(socket_.receive(), 60)
            consoles = await asyncio.to_thread(wait_for_children, web, 1)
            seen = [(c.cmdline(), _environ(c.pid)) for c in consoles]
            return seen, first.data if isinstance(first.data, bytes) else b""

    seen, first = asyncio.run(attach())
    [(argv, environ)] = seen
    assert argv[-3:] == ["loopwarden", "console", "--web"] and first  # the console drew its first frame
    assert web.token not in " ".join(argv) and web.token.encode() not in environ
    wait_for_children(web, 0)  # the socket closed: its console ended


def _environ(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read()


def test_the_token_is_kept_0600_reused_and_replaced_on_request(tmp_path: Path) -> None:
    paths = default_paths({"LOOPWARDEN_HOME": str(tmp_path)})
    first, made = load_token(paths)
    path = token_path(paths)
    assert made and stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == first
    again, made_again = load_token(paths)
    assert (again, made_again) == (first, False)
    os.chmod(path, 0o644)  # others could have read it: no longer a secret, so a new one is made
    replaced, _ = load_token(paths)
    assert replaced != first and stat.S_IMODE(path.stat().st_mode) == 0o600
    newest, made_new = load_token(paths, new=True)
    assert made_new and newest != replaced
    assert token_matches(newest, newest) and not token_matches(newest[:-1], newest)
    assert not token_matches(None, newest) and not token_matches("é" * 43, newest)


def test_the_server_reuses_the_stored_token_across_restarts_and_new_token_replaces_it(lw: Harness) -> None:
    one = WebServer(lw)
    try:
        assert one.stop() == 0
    finally:
        one.kill()
    assert one.printed_token  # made now: its address is printed with it
    two = WebServer(lw)
    try:
        assert two.token == one.token and two.stop() == 0
        assert not two.printed_token and "--show-token prints" in "".join(two.stderr)  # not printed again
    finally:
        two.kill()
    shown = WebServer(lw, "--show-token")
    try:
        assert shown.printed_token and shown.stop() == 0
    finally:
        shown.kill()
    three = WebServer(lw, "--new-token")
    try:
        assert three.token != one.token and three.stop() == 0
    finally:
        three.kill()
    assert "loopwarden web: stopped (0 browser consoles closed)" in "".join(three.stderr)


def test_a_read_only_web_client_is_refused_every_operator_action_by_the_daemon_and_it_is_audited(
        lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    ref = f"{sid}:{lw.wait_state(sid, 'gated')['pending_gates'][0]}"
    with Client.connect(lw.paths, autostart=False, name="web-readonly") as client:
        assert client.request("gates")[0]["ref"] == ref  # it may look
        with pytest.raises(DaemonError) as refused:
            client.request("approve", gate=ref)
    assert refused.value.kind == "refused" and "read-only client (web-readonly) cannot approve" in str(refused.value)
    assert lw.status(sid)["state"] == "gated"
    [attempt] = [a for a in lw.request("actions", session=sid) if a["action"] == "approve"]
    assert attempt["client_kind"] == "web-readonly" and attempt["outcome"].startswith("refused")
    with Client.connect(lw.paths, autostart=False, name="web") as client:  # the near miss: a writable web console
        client.request("approve", gate=ref)
    assert lw.status(sid)["pending_gates"] == []


def _web(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "loopwarden", "web", *args], env={**os.environ, "LOOPWARDEN_HOME": str(home)},
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_port_in_use_and_a_bad_host_are_one_line_errors(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = _web(tmp_path, "--port", str(port))
    assert busy.returncode == 2 and busy.stderr.count("\n") == 1, busy.stderr
    assert busy.stderr.startswith(f"loopwarden: error: cannot listen on 127.0.0.1:{port}: ")
    assert busy.stderr.rstrip().endswith("; --port 0 picks a free port")
    for host in ("no-such-host.invalid", "999.1.1.1"):
        bad = _web(tmp_path, "--host", host)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
        assert f"--host {host!r} is not an address of this machine" in bad.stderr
    port_out_of_range = _web(tmp_path, "--port", "70000")
    assert port_out_of_range.returncode == 2 and "Traceback" not in port_out_of_range.stderr


def test_a_non_loopback_address_is_served_with_a_warning(lw: Harness) -> None:
    server = WebServer(lw, "--host", "0.0.0.0")
    try:
        assert server.stop() == 0
        assert "warning: listening on 0.0.0.0, reachable from other machines" in "".join(server.stderr)
        assert urlsplit(server.base).hostname == socket.gethostname().lower()  # an address others can open
    finally:
        server.kill()
    quiet = WebServer(lw)  # the near miss: loopback, no warning
    try:
        assert quiet.stop() == 0 and "warning" not in "".join(quiet.stderr)
    finally:
        quiet.kill()


def test_without_textual_serve_installed_it_says_what_to_install(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['textual_serve.server'] = None; sys.argv = ['loopwarden', 'web', '--port', '0']; "
            "from loopwarden.entry import run; run()")
    result = subprocess.run([PY, "-c", code], env={**os.environ, "LOOPWARDEN_HOME": str(tmp_path)},
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "pip install textual-serve" in result.stderr


def test_a_supervised_agent_that_read_the_token_file_gets_no_console(lw: Harness, web: WebServer,
                                                                      tmp_path: Path) -> None:
    intruder = str(AGENTS / "web_intruder.py")
    token_file = str(token_path(lw.paths))
    marked, unmarked, outside = tmp_path / "marked.txt", tmp_path / "unmarked.txt", tmp_path / "outside.txt"
    first = lw.run_detached(PY, intruder, web.base, token_file, str(marked), adapter="plain")
    # an agent that clears the mark of its session first is still the daemon's descendant
    second = lw.run_detached("env", "-u", "LOOPWARDEN_SESSION", PY, intruder, web.base, token_file, str(unmarked),
                             adapter="plain")
    lw.wait_state(first, "exited")
    lw.wait_state(second, "exited")
    assert (marked.read_text(), unmarked.read_text()) == ("403", "403") and web.consoles() == []
    # the near miss: the same program run by the operator, outside every session, gets its console
    subprocess.run([PY, intruder, web.base, token_file, str(outside)], env=lw.env, check=True, timeout=60)
    assert outside.read_text() == "101"
    assert web.stop() == 0
    said = "".join(web.stderr)  # why, in its log: the daemon's own judgement
    assert f"runs inside session {first} (it is the agent)" in said
    assert f"runs inside session {second} (it is the agent)" in said


def test_consoles_end_by_themselves_when_the_server_is_killed(web: WebServer) -> None:
    ws = web.base.replace("http://", "ws://") + f"ws?token={web.token}"

    async def attached_then_killed() -> list[int]:
        async with aiohttp.ClientSession() as session, session.ws_connect(ws) as socket_:
            await asyncio.wait_for(socket_.receive(), 60)
            consoles = await asyncio.to_thread(wait_for_children, web, 1)
            web.proc.kill()  # SIGKILL: it cannot end them itself
            await asyncio.to_thread(web.proc.wait, 10)
            return [c.pid for c in consoles]

    [pid] = asyncio.run(attached_then_killed())
    wait_for(lambda: gone(pid), what="the orphaned console to end")


def _own_address() -> str | None:
    """One of this machine's addresses that is not loopback, if it has one."""
    import psutil

    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family == socket.AF_INET and not entry.address.startswith("127."):
                return str(entry.address)
    return None


def test_an_agent_coming_through_the_machines_own_address_gets_no_console(lw: Harness, tmp_path: Path) -> None:
    own = _own_address()
    if own is None:
        pytest.skip("this machine has no address but loopback")
    server = WebServer(lw, "--host", "0.0.0.0")
    try:
        base = f"http://{own}:{urlsplit(server.base).port}/"
        intruder = str(AGENTS / "web_intruder.py")
        out, outside = tmp_path / "agent.txt", tmp_path / "outside.txt"
        sid = lw.run_detached(PY, intruder, base, str(token_path(lw.paths)), str(out), adapter="plain")
        lw.wait_state(sid, "exited")
        assert out.read_text() == "403" and server.consoles() == []
        # the near miss: the operator's own program through the same address gets its console
        subprocess.run([PY, intruder, base, str(token_path(lw.paths)), str(outside)], env=lw.env, check=True,
                       timeout=60)
        assert outside.read_text() == "101"
        assert server.stop() == 0
        assert f"runs inside session {sid}" in "".join(server.stderr)
    finally:
        server.kill()


def test_a_local_peer_that_cannot_be_identified_is_refused_and_a_remote_one_is_not_judged(lw: Harness) -> None:
    from loopwarden.web.peers import refusal

    with socket.socket() as listener:  # a real server end with no connection from port 1 to it
        listener.bind(("127.0.0.1", 0))
        server = listener.getsockname()
        own = _own_address()
        for local in ["127.0.0.1", "::ffff:127.0.0.1", *([own] if own else [])]:
            why = refusal(lw.paths, (local, 1), server)
            assert why and "cannot be identified" in why, local
        assert refusal(lw.paths, None, server) == "refused: a connection whose ends cannot be seen"
        assert refusal(lw.paths, ("198.51.100.7", 40000), server) is None  # another machine's address


def test_browsers_connecting_at_once_get_no_more_than_max_consoles(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from loopwarden.web import server as web_server

    monkeypatch.setattr(web_server, "MAX_CONSOLES", 2)
    paths = default_paths({"LOOPWARDEN_HOME": str(tmp_path)})
    paths.data.mkdir(parents=True, exist_ok=True)
    idle = [PY, "-c", "import time; time.sleep(60)"]  # a console that never draws: only the handshakes count

    async def at_once() -> list[int]:
        stop, ready = asyncio.Event(), asyncio.Event()
        ports: list[int] = []
        served = web_server.WebConsole(idle, "t" * 43, host="127.0.0.1", port=0, title="t", paths=paths)

        def started(port: int) -> None:
            ports.append(port)
            ready.set()

        running = asyncio.create_task(served.run(started, stop))
        await asyncio.wait_for(ready.wait(), 30)
        url = f"ws://127.0.0.1:{ports[0]}/ws?token={'t' * 43}"
        async with aiohttp.ClientSession() as session:
            async def one() -> int:
                try:
                    await session.ws_connect(url)
                    return 101
                except aiohttp.WSServerHandshakeError as exc:
                    return exc.status

            statuses = await asyncio.gather(*(one() for _ in range(5)))
            stop.set()
            await asyncio.wait_for(running, 60)
        return sorted(statuses)

    assert asyncio.run(at_once()) == [101, 101, 503, 503, 503]


def test_a_consoles_stderr_goes_to_a_log_file_not_onto_the_servers_output(lw: Harness) -> None:
    # PYTHONVERBOSE makes every Python process it reaches (the console too) write each import on stderr
    server = WebServer(lw, env={"PYTHONVERBOSE": "1"})
    ws = server.base.replace("http://", "ws://") + f"ws?token={server.token}"

    async def attach() -> None:
        async with aiohttp.ClientSession() as session, session.ws_connect(ws) as socket_:
            await asyncio.wait_for(socket_.receive(), 60)

    try:
        asyncio.run(attach())
        wait_for_children(server, 0)
        assert server.stop() == 0
        assert len(server.stdout) == 1, server.stdout[:5]  # stdout keeps the address alone ...
        log = (lw.paths.data / "web-consoles.log").read_text(errors="replace")
        assert "import" in log  # ... the console's verbose imports landed in the log
    finally:
        server.kill()
