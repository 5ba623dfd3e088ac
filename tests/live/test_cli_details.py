"""Small things a newcomer trips on: read-only commands start no daemon, logs carry times, help and errors agree."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from loopwarden.supervisor.health import RESETTABLE
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k != "CLAUDECODE"}, "LOOPWARDEN_HOME": str(home)}
    return subprocess.run([PY, "-m", "loopwarden", *args], env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_read_only_commands_start_no_daemon_and_say_so_in_one_line(tmp_path: Path) -> None:
    socket = (tmp_path / "run" / "daemon.sock").resolve()
    for args in (["ls"], ["status"], ["status", "s1"], ["gates"], ["logs", "s1"], ["audit"]):
        proc = _cli(tmp_path, *args)
        assert proc.returncode == 3, (args, proc.stderr)
        assert proc.stderr == (f"loopwarden: error: no daemon is running (socket {socket}); 'loopwarden serve', "
                               "'run' or the console starts one\n"), args
    assert not socket.exists()


def test_logs_lines_begin_with_the_time(lw: Harness) -> None:
    sid = lw.run_detached(PY, "-c", "print('hello', flush=True)", adapter="plain")
    lw.wait_state(sid, "exited")
    assert lw.cli("pause", sid).returncode == 2  # ended: refused, and the refusal is in the log too
    lines = lw.cli("logs", sid).stdout.splitlines()
    assert lines and all(re.match(r"\d\d:\d\d:\d\d ", line) for line in lines), lines
    assert any(line.endswith("│ hello") for line in lines)
    assert any(" PAUSE " in line and "refused: session" in line for line in lines)


def test_logs_of_an_ended_session_end_with_how_it_ended(lw: Harness) -> None:
    sid = lw.run_detached("sh", "-c", "echo working; exit 3", adapter="plain")
    lw.wait_state(sid, "exited")
    assert lw.cli("ls").stdout.splitlines()[-1].endswith(" -")  # an ended session holds no memory
    assert lw.cli("status", sid).stdout.count("mem -") == 1
    lines = lw.cli("logs", sid).stdout.splitlines()
    assert re.fullmatch(rf"\d\d:\d\d:\d\d  session {sid} exited 3", lines[-1]), lines
    running = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain")
    lw.wait_state(running, "running")
    assert "session" not in lw.cli("logs", running).stdout.splitlines()[-1]  # still running: no end line
    lw.cli("kill", running)


def test_ls_says_what_loopwarden_did_to_each_session(lw: Harness) -> None:
    """The INTERVENED column, as the console has it: what was done to a looping agent; `-` for one left alone."""
    calm = lw.run_detached(PY, "-c", "print('hello', flush=True)", adapter="plain")
    lw.wait_state(calm, "exited")
    looping = lw.scenario("repetition")
    wait_for(lambda: any(v["action"] == "nudge" for v in lw.verdicts(looping)), what="a nudge")
    header, *lines = lw.cli("ls").stdout.splitlines()
    rows = {line.split()[0]: line for line in lines}
    column = header.index("INTERVENED")
    assert rows[looping][column:].startswith("nudged ")
    assert rows[calm][column:column + 2] == "- "
    lw.cli("kill", looping)


def test_reset_counter_names_are_the_same_in_help_and_error(lw: Harness) -> None:
    names = ", ".join(sorted(RESETTABLE))
    help_text = " ".join(lw.cli("reset", "--help").stdout.split())
    assert f"Reset only this counter: {names}." in help_text
    sid = lw.scenario("max_runtime")  # runs until stopped: a live session to reset (a looping one may end first)
    lw.wait_state(sid, "running")
    proc = lw.cli("reset", sid, "--counter", "nonesuch")
    assert proc.returncode == 2
    assert proc.stderr == f"loopwarden: error: unknown counter 'nonesuch'; use one of {names}\n"
    lw.cli("kill", sid)


def test_audit_limit_below_one_is_a_usage_error(lw: Harness) -> None:
    proc = lw.cli("audit", "--limit", "-1")
    assert proc.returncode == 2
    assert proc.stderr.startswith("loopwarden: error: Invalid value for '--limit': -1 is not in the range x>=1.")
    assert "nothing" not in proc.stdout + proc.stderr


def test_a_signal_death_reads_in_words(lw: Harness) -> None:
    proc = lw.cli("run", "--adapter", "plain", "--name", "victim", "--", PY, "-c",
                  "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    sid = lw.status("victim")["id"]
    assert proc.stderr.endswith(f"loopwarden: session {sid} killed by SIGKILL\n"), proc.stderr
    listed = [line for line in lw.cli("ls").stdout.splitlines() if line.startswith(sid + " ")]
    assert len(listed) == 1 and "killed by SIGKILL" in listed[0] and "-9" not in listed[0]
    assert "ended: killed by SIGKILL" in lw.cli("status", sid).stdout


def test_every_command_has_an_example_in_its_help() -> None:
    """The README promises it: a newcomer learns a command from its --help."""
    import click

    from loopwarden.cli import main

    def walk(cmd: click.Command, path: list[str]) -> Any:
        yield path, cmd
        ctx = click.Context(cmd)
        for name in (cmd.list_commands(ctx) if isinstance(cmd, click.Group) else ()):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, name
            yield from walk(sub, [*path, name])

    missing = [" ".join(path) for path, cmd in walk(main, ["loopwarden"])
               if not re.search(r"^\s*(Examples?|Start here)\b", cmd.get_help(click.Context(cmd)), re.M)]
    assert missing == []


def test_pausing_twice_says_already_paused(lw: Harness) -> None:
    sid = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain")
    lw.wait_state(sid, "running")
    assert lw.cli("pause", sid).stdout == f"{sid}: paused\n"
    assert lw.cli("pause", sid).stdout == f"{sid}: paused already\n"
    assert lw.cli("resume", sid).stdout == f"{sid}: running\n"
    assert lw.cli("resume", sid).stdout == f"{sid}: running already\n"
    lw.cli("kill", sid)


def test_an_attached_run_shows_what_a_session_wrote_before_it_subscribed(lw: Harness, capsys: Any,
                                                                       monkeypatch: Any) -> None:
    """The worst case of a late subscription: the session has ended before `run` follows it."""
    from loopwarden.cli.common import connect
    from loopwarden.cli.live import _follow

    sid = lw.run_detached(PY, "-c", "print('first'); print('second'); raise SystemExit(3)", adapter="plain")
    lw.wait_state(sid, "exited")
    monkeypatch.setenv("LOOPWARDEN_HOME", lw.env["LOOPWARDEN_HOME"])  # the CLI's own profile lookup
    with connect() as client:
        code = _follow(client, sid, as_json=False)
    out, err = capsys.readouterr()
    assert code == 3
    assert "│ first" in out and "│ second" in out and out.index("│ first") < out.index("│ second")
    assert err.endswith(f"loopwarden: session {sid} exited 3\n")


def test_run_from_a_removed_directory_says_so_in_one_line_and_starts_nothing(lw: Harness, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    # a shell whose directory was removed under it: the child inherits a cwd that no longer exists
    proc = subprocess.Popen([PY, "-c", "import os, subprocess, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
                             "sys.exit(subprocess.run(sys.argv[2:]).returncode)", str(gone),
                             PY, "-m", "loopwarden", "run", "--detach", "--", "true"],
                            env=lw.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert err.count("\n") == 1 and "current directory cannot be read" in err and "Traceback" not in err
    assert out == "" and lw.request("list") == []
