"""Every door an operator uses checks who is asking, with one judgement (issue 29, item 1).

The doors: the daemon's socket, the web console (its pages and its websocket) and `--host` (another machine's
daemon, which sees only sshd). The sessions: launched, adopted and attached by hooks, their descendants, and
a launched agent nested deeper than the ancestry walk reaches. Each test runs the same knocking program
(tests/agents/door_knocker.py) inside a session, where every door must refuse it, and the same program as
the operator, where every door lets it in. Real daemons, a real `loopwarden web`, a real sshd.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loopwarden.runtime.principal import EXPLANATION
from loopwarden.web.token import token_path
from tests.chaos.test_principals import report_done
from tests.hosts.sshd_harness import Box
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.scenarios import opened_gate
from tests.support.waiting import wait_for
from tests.web.web_harness import WebServer

KNOCKER = str(AGENTS / "door_knocker.py")


def plan(tmp_path: Path, name: str, lw: Harness, web: WebServer, box: Box | None,
         go: Path | None = None) -> tuple[Path, Path]:
    """A knocking plan aimed at a gate here and one on `box`: (the plan's file, where its report goes)."""
    gate = opened_gate(lw)
    remote_gate = None
    if box is not None:
        sid = box.remote.scenario("gate_request")
        box.remote.wait_state(sid, "gated")
        remote_gate = f"{sid}:{box.remote.status(sid)['pending_gates'][0]}"
    out = tmp_path / f"{name}.json"
    path = tmp_path / f"{name}.plan.json"
    path.write_text(json.dumps({"out": str(out), "go": str(go) if go else None, "web": web.base,
                                "token_file": str(token_path(lw.paths)), "gate": gate,
                                "host": box.host if box else None, "remote_gate": remote_gate}))
    return path, out


def knocked(out: Path) -> dict[str, Any]:
    return wait_for(lambda: out.exists() and out.read_text() and json.loads(out.read_text()), timeout=120,
                    what=f"{out.name}: the knocker's report")


def assert_refused_everywhere(report: dict[str, Any], where: str, web: WebServer, lw: Harness) -> None:
    """Every door said no, in the daemon's words, and nothing was decided."""
    assert (report["http"], report["websocket"]) == (403, 403), report
    assert web.consoles() == []
    for door in ("socket", "host"):
        if door in report:
            code, said = report[door]
            assert code == 4, (door, report)
            assert f"runs inside {where}" in said and EXPLANATION in said, (door, said)
    pending = [s for s in lw.request("list") if s.get("pending_gates")]
    assert pending, "a gate here was decided"


def assert_let_in(report: dict[str, Any]) -> None:
    assert (report["http"], report["websocket"]) == (302, 101), report  # the page's token becomes a cookie
    assert report["socket"][0] == 0, report
    if "host" in report:
        assert report["host"][0] == 0, report


@pytest.fixture
def host(request: pytest.FixtureRequest, lw: Harness) -> Box | None:
    """The sshd box, with this machine's CLI pointed at it (None where sshd cannot run here)."""
    try:
        found: Box = request.getfixturevalue("box")
    except pytest.skip.Exception:
        return None
    lw.env["LOOPWARDEN_SSH_COMMAND"] = found.ssh_command
    return found


def test_an_adopted_process_is_refused_at_every_door_and_the_operator_is_not(
        lw: Harness, web: WebServer, host: Box | None, tmp_path: Path) -> None:
    go = tmp_path / "go"
    path, out = plan(tmp_path, "adopted", lw, web, host, go)
    agent = subprocess.Popen([PY, KNOCKER, str(path)], env=lw.env)  # started outside loopwarden, then adopted
    try:
        adopted = lw.cli("adopt", str(agent.pid))
        assert adopted.returncode == 0, adopted.stderr
        sid = next(s["id"] for s in lw.request("list") if s.get("pid") == agent.pid)
        go.touch()
        report = knocked(out)
        assert_refused_everywhere(report, f"session {sid}", web, lw)
        # the near miss: the operator runs the same program, outside every session
        path, out = plan(tmp_path, "operator", lw, web, host)
        subprocess.run([PY, KNOCKER, str(path)], env=lw.env, check=True, timeout=120)
        assert_let_in(knocked(out))
    finally:
        agent.kill()
        agent.wait(10)


def test_a_hook_attached_agents_tool_is_refused_at_every_door(lw: Harness, web: WebServer, host: Box | None,
                                                               tmp_path: Path) -> None:
    path, out = plan(tmp_path, "tool", lw, web, host)
    claude_plan, report, release = tmp_path / "claude.json", tmp_path / "claude.jsonl", tmp_path / "release"
    claude_plan.write_text(json.dumps({"hook": f"{PY} -m loopwarden hook claude-code", "session_id": "c-doors",
                                       "cwd": "/tmp/doors", "commands": [f"{PY} {KNOCKER} {path}"],
                                       "release": str(release)}))
    claude = subprocess.Popen([PY, str(AGENTS / "fake_claude.py"), str(claude_plan), str(report)], env=lw.env)
    try:
        report_done(report, "ready")
        [snap] = [s for s in lw.request("list") if s.get("claude_session") == "c-doors"]
        assert_refused_everywhere(knocked(out), f"session {snap['id']}", web, lw)
    finally:
        release.touch()
        claude.wait(30)


def test_a_launched_agent_nested_past_the_walk_is_refused_at_every_door(
        lw: Harness, web: WebServer, host: Box | None, tmp_path: Path) -> None:
    path, out = plan(tmp_path, "nested", lw, web, host)
    # a session of its own (setsid), then 300 shells deep, its mark cleared before it all: nothing on the
    # first 256 ancestors ties it to its session, so the walk that could not reach init decides
    sid = lw.run_detached("env", "-u", "LOOPWARDEN_SESSION", "-u", "LOOPWARDEN_SESSION_DAEMON", "setsid", "-w",
                          "sh", str(AGENTS / "nest.sh"), "300", PY, KNOCKER, str(path), adapter="plain")
    report = knocked(out)
    assert (report["http"], report["websocket"]) == (403, 403), report
    for door in ("socket", "host"):
        if door in report:
            code, said = report[door]
            assert code == 4 and "could not be traced to a person's terminal" in said, (door, said)
    lw.wait_state(sid, "exited")


def test_a_browser_run_by_an_agent_gets_no_page(lw: Harness, web: WebServer, tmp_path: Path) -> None:
    """Chromium itself, started inside a session with the token read from its file, is shown the refusal."""
    from tests.web.browser import CHROMIUM, FLAGS, missing

    why = missing()
    if why:
        pytest.skip(why)
    out = tmp_path / "page.html"
    url = f"{web.base}?token={token_path(lw.paths).read_text().strip()}"
    browser = " ".join([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", f"'{url}'"])
    sid = lw.run_detached("sh", "-c", f"{browser} > {out} 2>/dev/null", adapter="plain")
    lw.wait_state(sid, "exited", timeout=120)
    page = out.read_text()
    assert "refused: pid " in page and f"runs inside session {sid}" in page, page[:2000]
    assert web.consoles() == []


def test_a_connection_made_before_its_process_was_adopted_is_judged_again(lw: Harness, tmp_path: Path) -> None:
    """Each operator action is judged when it comes, not only when its connection was made."""
    gate = opened_gate(lw)
    ready, go, out = tmp_path / "connected", tmp_path / "go", tmp_path / "out.json"
    early = ("import json, os, sys, time\n"
             "from loopwarden.paths import default_paths\n"
             "from loopwarden.runtime.client import Client, DaemonError\n"
             "client = Client.connect(default_paths(), autostart=False, name='cli')\n"
             "open(sys.argv[1], 'w').write('connected')\n"
             "while not os.path.exists(sys.argv[2]): time.sleep(0.02)\n"
             "try:\n"
             "    said = ['done', client.request('approve', gate=sys.argv[3])]\n"
             "except DaemonError as exc:\n"
             "    said = [exc.kind, str(exc)]\n"
             "open(sys.argv[4], 'w').write(json.dumps(said))\n")
    agent = subprocess.Popen([PY, "-c", early, str(ready), str(go), gate, str(out)], env=lw.env)
    try:
        wait_for(ready.exists, what="the connection")
        adopted = lw.cli("adopt", str(agent.pid))
        assert adopted.returncode == 0, adopted.stderr
        sid = next(s["id"] for s in lw.request("list") if s.get("pid") == agent.pid)
        go.touch()
        kind, said = knocked(out)
        assert kind == "refused" and f"runs inside session {sid}" in said, said
        assert lw.status(gate.split(":")[0])["pending_gates"]
    finally:
        agent.kill()
        agent.wait(10)
