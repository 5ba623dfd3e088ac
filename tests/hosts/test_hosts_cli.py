"""`loopwarden --host`: the CLI on another machine's daemon through a real sshd, and the names it accepts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loopwarden.paths import SocketPathTooLong
from loopwarden.cli import host_first
from loopwarden.runtime.hosts import SSH_ENV, HostError, Tunnel, check_name, listed_hosts, split_ref
from tests.hosts.sshd_harness import DEAD, Box
from tests.support.daemon import Harness
from tests.support.paths import PY


def with_ssh(lw: Harness, box: Box) -> Harness:
    lw.env["LOOPWARDEN_SSH_COMMAND"] = box.ssh_command
    return lw


def test_ls_and_status_through_a_host_show_its_sessions_not_ours(lw: Harness, box: Box) -> None:
    mine = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="ours")
    theirs = box.remote.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="there")
    with_ssh(lw, box)
    started = time.monotonic()
    listed = lw.cli("--host", box.host, "ls")
    took = time.monotonic() - started
    assert listed.returncode == 0, listed.stderr
    assert "there" in listed.stdout and "ours" not in listed.stdout, listed.stdout
    status = lw.cli("--host", box.host, "status", theirs)
    assert status.returncode == 0 and "there" in status.stdout
    here = lw.cli("ls").stdout
    assert mine in here and "ours" in here and "there" not in here  # without --host: this machine's
    print(f"--host ls, a whole CLI run through ssh: {took:.2f}s")


def test_approve_through_a_host_decides_its_gate_and_its_audit_says_so(lw: Harness, box: Box) -> None:
    sid = box.remote.scenario("gate_request")
    box.remote.wait_state(sid, "gated")
    gate = box.remote.status(sid)["pending_gates"][0]
    with_ssh(lw, box)
    gates = lw.cli("--host", box.host, "gates")
    assert f"{sid}:{gate}" in gates.stdout, gates.stderr
    approved = lw.cli("--host", box.host, "approve", f"{sid}:{gate}", "--note", "go on")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.strip() == f"{sid}:{gate} approved"
    [entry] = [a for a in box.remote.request("actions", session=sid) if a["action"] == "approve"]
    assert (entry["note"], entry["target"], entry["outcome"]) == ("go on", f"{sid}:{gate}", "done")
    assert lw.request("actions") == []  # nothing of it on this machine's daemon


def test_a_reference_that_begins_with_a_host_of_the_hosts_file_goes_there(lw: Harness, box: Box) -> None:
    sid = box.remote.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="there")
    (lw.home / "hosts").write_text(f"# machines\n{box.host}   # the test box\n")
    with_ssh(lw, box)
    killed = lw.cli("kill", f"{box.host}:{sid}", "--note", "from afar")
    assert killed.returncode == 0, killed.stderr
    box.remote.wait_state(sid, "terminated")
    logs = lw.cli("logs", f"{box.host}:{sid}")
    assert logs.returncode == 0 and "from afar" in logs.stdout, logs.stderr


def test_an_unreachable_host_is_one_line_naming_it_and_sshs_reason(lw: Harness, box: Box) -> None:
    with_ssh(lw, box)
    proc = lw.cli("--host", DEAD, "ls")
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"loopwarden: error: host {DEAD}: ") and "refused" in proc.stderr, proc.stderr


def test_a_host_without_a_daemon_is_one_line_and_none_is_started_there(lw: Harness, box: Box) -> None:
    box.remote.stop()
    with_ssh(lw, box)
    for command in (("ls",), ("approve", "s1:g1")):  # one that reads, one that acts
        proc = lw.cli("--host", box.host, *command)
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr == (f"loopwarden: error: host {box.host}: no daemon is running there (socket "
                               f"{box.remote.paths.socket}); start one there with 'loopwarden serve'\n")
    assert not box.remote.paths.socket.exists()


def test_where_says_the_socket_and_starts_nothing(lw: Harness) -> None:
    proc = lw.cli("where", "--json")
    assert proc.returncode == 0 and f'"socket":"{lw.paths.socket}"' in proc.stdout and '"daemon":true' in proc.stdout
    lw.stop()
    proc = lw.cli("where")
    assert proc.stdout.strip() == f"{lw.paths.socket} (no daemon is running)"
    assert not lw.paths.socket.exists()


def test_a_host_reference_copied_from_a_console_says_how_to_reach_that_host(lw: Harness) -> None:
    proc = lw.cli("approve", "box:s2:g1")  # box watched by a console's --host, not in the hosts file
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "use 'loopwarden --host box approve s2:g1', or add box to the hosts file" in proc.stderr
    proc = lw.cli("approve", "s9:g1")  # the near miss: a plain unknown gate gets no host hint
    assert proc.returncode == 2 and "--host" not in proc.stderr and "hosts file" not in proc.stderr


def test_host_option_is_refused_for_commands_that_act_here(lw: Harness) -> None:
    proc = lw.cli("--host", "box", "run", "--", "true")
    assert proc.returncode == 2 and "ssh box loopwarden run" in proc.stderr
    proc = lw.cli("--host", "-oProxyCommand=touch /tmp/x", "ls")
    assert proc.returncode == 2 and "not a host name" in proc.stderr
    proc = lw.cli("--host", "a b")  # no command: the console, which refuses it before it opens
    assert proc.returncode == 2 and proc.stderr.startswith("loopwarden: error: not a host name: 'a b'")
    proc = lw.cli("console", "--no-local")
    assert proc.returncode == 2 and "--no-local leaves nothing to show" in proc.stderr


@pytest.mark.parametrize("name", ["-oProxyCommand=x", "box:22", "a b", "", "box;rm", "user@-oProxyCommand=x",
                                  "box%h", "local", "s3", "g12", "S3"])
def test_names_that_are_not_ssh_destinations_are_refused(name: str) -> None:
    with pytest.raises(HostError, match="not a host name"):
        check_name(name)


@pytest.mark.parametrize("name", ["box", "deploy@box-2.example.com", "my_alias", "localhost", "s3box", "gw1.lan"])
def test_ssh_destinations_are_accepted(name: str) -> None:
    assert check_name(name) == name


def test_the_hosts_file_lists_hosts_once_and_names_a_bad_line(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    assert listed_hosts(hosts) == []  # none yet: no hosts, no error
    hosts.write_text("box1\n\n# comment\nuser@box2  # prod\nbox1\n")
    assert listed_hosts(hosts) == ["box1", "user@box2"]
    hosts.write_text("box1\n-oProxyCommand=x\n")
    with pytest.raises(HostError, match="line 2: not a host name"):
        listed_hosts(hosts)
    for taken in ("local", "s3"):  # it would replace this machine's feed, or take `approve s3:g1` over
        hosts.write_text(f"box1\n{taken}\n")
        with pytest.raises(HostError, match=f"^{hosts}, line 2: not a host name: '{taken}' names this machine"):
            listed_hosts(hosts)


def test_references_split_only_on_a_known_host() -> None:
    assert split_ref("box:s3:g1", {"box"}) == ("box", "s3:g1")
    assert split_ref("s3:g1", {"box"}) == ("local", "s3:g1")
    assert split_ref("fixer:g1", {"box"}) == ("local", "fixer:g1")  # a session named fixer, not a host


def test_the_forwarded_socket_lives_in_a_short_private_directory(tmp_path: Path) -> None:
    tunnel = Tunnel("box")
    try:
        socket = tunnel.paths.socket
        assert len(bytes(socket)) <= 100 and (socket.parent.parent.stat().st_mode & 0o777) == 0o700
    finally:
        tunnel.close()
    assert not socket.parent.exists()
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    with pytest.raises(SocketPathTooLong):
        _ = Tunnel("box", base=deep).paths


def fake_ssh(tmp_path: Path, body: str) -> str:
    script = tmp_path / "ssh"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("socket", ["/tmp/a:b.sock", "/tmp/" + "d" * 120 + ".sock", "relative.sock"])
def test_a_where_answer_that_cannot_be_forwarded_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             socket: str) -> None:
    monkeypatch.setenv(SSH_ENV, fake_ssh(tmp_path, f"echo '{{\"socket\": \"{socket}\", \"daemon\": true}}'"))
    tunnel = Tunnel("box", base=tmp_path)
    try:
        with pytest.raises(HostError, match="named a socket that cannot be forwarded") as raised:
            tunnel.ensure()
        assert "\n" not in str(raised.value) and tunnel.process is None
    finally:
        tunnel.close()
    monkeypatch.setenv(SSH_ENV, fake_ssh(tmp_path, "echo '{\"socket\": \"/tmp/ok.sock\", \"daemon\": true}'"))
    assert Tunnel("box", base=tmp_path).locate() == "/tmp/ok.sock"  # the near miss


def test_what_the_remote_side_says_reaches_the_terminal_visible_and_clipped(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    said = "\\033]0;owned\\007\\033[2J" + "x" * 500
    monkeypatch.setenv(SSH_ENV, fake_ssh(tmp_path, f"printf '{said}\\n' >&2; exit 255"))
    tunnel = Tunnel("box", base=tmp_path)
    with pytest.raises(HostError) as raised:
        tunnel.locate()
    message = str(raised.value)
    assert message.startswith("host box: ") and message.isprintable() and "\x1b" not in message
    assert len(message) < 300 and "owned" in message


def test_host_after_the_command_is_read_as_before_it() -> None:
    assert host_first(["ls", "--host", "box"]) == ["--host", "box", "ls"]
    assert host_first(["approve", "s3:g1", "--host=box", "--note", "ok"]) == ["--host=box", "approve", "s3:g1",
                                                                             "--note", "ok"]
    assert host_first(["inject", "s3", "--", "--host", "box"]) == ["inject", "s3", "--", "--host", "box"]  # text
    assert host_first(["run", "--host", "box"]) == ["run", "--host", "box"]  # run acts here: its error says so
    assert host_first(["console", "--host", "box"]) == ["console", "--host", "box"]  # its own option
    assert host_first(["deny", "g1", "--note", "--host", "box"], {"--note"}) == ["deny", "g1", "--note", "--host",
                                                                              "box"]  # a note that says --host


def test_host_after_the_command_reaches_that_host(lw: Harness, box: Box) -> None:
    box.remote.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="there")
    with_ssh(lw, box)
    listed = lw.cli("ls", "--host", box.host)
    assert listed.returncode == 0 and "there" in listed.stdout, listed.stderr
