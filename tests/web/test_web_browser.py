"""The console in a real browser: Chromium opens `loopwarden web` with its token, sees the sessions table,
approves a gate with the console's own keys, and the daemon's audit log names the web as the source."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.daemon import Harness
from tests.support.processes import gone
from tests.support.waiting import wait_for
from tests.web.browser import chromium, press, screen, wait_screen
from tests.web.web_harness import WebServer, wait_for_children

CAPTURES = os.environ.get("LOOPWARDEN_WEB_CAPTURES")  # a folder: the test keeps its screenshots there


def _gated(lw: Harness) -> tuple[str, str]:
    sid = lw.scenario("gate_request")
    snap = lw.wait_state(sid, "gated")
    return sid, f"{sid}:{snap['pending_gates'][0]}"


def _capture(driver: object, name: str) -> None:
    if CAPTURES:
        driver.save_screenshot(str(Path(CAPTURES) / name))  # type: ignore[attr-defined]


def test_a_browser_with_the_token_sees_the_table_and_approves_a_gate_audited_as_the_web(
        lw: Harness, web: WebServer, browser_profile: Path) -> None:
    sid, ref = _gated(lw)
    with chromium(browser_profile) as driver:
        driver.get(web.url)
        assert "token=" not in driver.current_url  # moved into a cookie, out of the address bar and history
        table = wait_screen(driver, lambda s: "gate_request" in s and "NAME" in s and "STATE" in s,
                            "the sessions table with the gated session")
        row = next(line for line in table.splitlines() if "gate_request" in line)
        assert sid in row and "gated" in row
        _capture(driver, "web_console.png")
        press(driver, "g")
        wait_screen(driver, lambda s: ref in s, f"{ref} in the gates queue")
        _capture(driver, "web_console_gates.png")
        press(driver, "a")
        wait_screen(driver, lambda s: f"Approve {ref}" in s, "the approval question")
        assert lw.status(sid)["pending_gates"]  # asked first: nothing is decided before `y`
        press(driver, "y")
        wait_for(lambda: lw.status(sid)["pending_gates"] == [], what="the approval to reach the daemon")
    [approve] = [a for a in lw.request("actions", session=sid) if a["action"] == "approve"]
    assert approve["target"] == ref and approve["client_kind"] == "web" and approve["outcome"] == "done"
    audit = lw.cli("audit", sid)
    assert "[web pid" in audit.stdout, audit.stdout  # `loopwarden audit` says it came from the web
    wait_for_children(web, 0)  # the tab went with the browser: its console process ended


def test_a_read_only_web_console_shows_no_action_keys_and_decides_nothing(
        lw: Harness, browser_profile: Path) -> None:
    sid, ref = _gated(lw)
    server = WebServer(lw, "--read-only")
    try:
        with chromium(browser_profile) as driver:
            driver.get(server.url)
            text = wait_screen(driver, lambda s: "gate_request" in s and "read-only" in s,
                               "the read-only console with the gated session")
            footer = text.rstrip().splitlines()[-1]
            assert "Approve" not in footer and "Kill" not in footer and "Gates" in footer
            press(driver, "a", "y", "d")
            wait_screen(driver, lambda s: "read-only console: cannot" in s, "the refusal")
        assert lw.status(sid)["pending_gates"] and ref.split(":")[1] in lw.status(sid)["pending_gates"]
        assert [a for a in lw.request("actions", session=sid) if a["action"] in ("approve", "deny")] == []
    finally:
        server.kill()


def test_the_console_of_a_closed_tab_ends_and_ctrl_c_ends_the_rest(lw: Harness, web: WebServer,
                                                                    browser_profile: Path) -> None:
    with chromium(browser_profile) as driver:
        driver.get(web.url)
        wait_screen(driver, lambda s: "NAME" in s, "the console")
        [console] = wait_for_children(web, 1)
        driver.get("about:blank")  # the tab leaves the page: its websocket closes
        wait_for(lambda: gone(console.pid), what="its console to end")
        driver.get(web.url)
        wait_screen(driver, lambda s: "NAME" in s, "the console again")
        assert screen(driver)
        [console] = wait_for_children(web, 1)
        assert web.stop() == 0  # Ctrl-C while a browser is attached
    assert gone(console.pid)
    assert "stopped (1 browser console closed)" in "".join(web.stderr)



def test_a_browser_without_the_token_is_refused_and_no_console_starts(
        lw: Harness, web: WebServer, browser_profile: Path) -> None:
    with chromium(browser_profile) as driver:
        driver.get(web.base)  # the address without ?token=
        body = driver.find_element("tag name", "body").text
        assert "loopwarden web: a token is required" in body and "data-session-websocket-url" not in driver.page_source
        driver.get(web.base + "?token=" + "x" * len(web.token))
        assert "loopwarden web: wrong token" in driver.find_element("tag name", "body").text
        assert web.consoles() == []
        driver.get(web.url)  # the near miss: with it, the console
        wait_screen(driver, lambda s: "NAME" in s, "the console")
        wait_for_children(web, 1)


def test_the_web_console_shows_a_gates_diff_and_the_sessions_diff_with_agent_text_inert(
        lw: Harness, web: WebServer, browser_profile: Path, tmp_path: Path) -> None:
    """A gate on an edit shows, in the browser, the change its call would make; `v` opens the session's diff;
    the escape sequences and markup the agent wrote show as text (the page's terminal did not act on them)."""
    from tests.console.test_diffs import gated

    sid, ref = gated(lw, tmp_path)
    with chromium(browser_profile) as driver:
        driver.get(web.url)
        wait_screen(driver, lambda s: "hostile" in s and "NAME" in s, "the sessions table")
        press(driver, "g")
        gate = wait_screen(driver, lambda s: "the change this call would make" in s and "seed_users.json" in s,
                           f"{ref}'s change in the gates queue")
        assert '-  {"email": "ann@example.com", "id": 2},' in gate
        _capture(driver, "web_gate_diff.png")
        press(driver, "v")
        diff = wait_screen(driver, lambda s: "files changed" in s and "+unique=False" in s, "the session's diff")
        assert "1 file changed, +4 -4" in diff and "M +4 -4  migrations/0007_users.py" in diff
        assert "\\x1b[2J\\x1b]0;pwned\\x07[bold red]markup[/bold red]" in diff
        assert f"{sid} diff" in diff
        _capture(driver, "web_session_diff.png")
