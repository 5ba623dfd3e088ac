"""The keeper holds agents across the daemon's death: nothing they write is lost or repeated, stdin waits for the
store, max_runtime holds without a daemon, a dead daemon is started again and only then are agents stopped."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from loopwarden.runtime import keeper_wire as wire
from loopwarden.runtime.kept import KEEP_BYTES, READ_SIZE
from tests.keeper.wire_client import Control, OutputConnection, read_to_eof, read_until, start_keeper
from tests.support.processes import gone
from tests.support.waiting import wait_for

AGENTS = Path(__file__).resolve().parent.parent / "agents"
COUNTER = [sys.executable, str(AGENTS / "counter.py")]


def expected(count: int) -> bytes:
    return b"".join(f"line {i:08d} ".encode() + b"x" * 40 + b"\n" for i in range(count))


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "rt"
    path.mkdir(mode=0o700)
    yield path


@pytest.fixture
def keeper(runtime: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = start_keeper(runtime, "--restarts", "0", "--daemon-wait", "30")
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def spawn(control: Control, sid: str, argv: list[str], **fields: object) -> int:
    reply = control.ask("spawn", sid=sid, argv=argv, env={"PATH": os.environ["PATH"]}, cwd=None, **fields)
    assert "error" not in reply, reply
    return int(reply["pid"])


def test_the_socket_is_the_owners_alone(runtime: Path, keeper: subprocess.Popen[bytes]) -> None:
    mode = stat.S_IMODE((runtime / wire.SOCKET_NAME).stat().st_mode)
    assert mode == 0o600


def test_output_reaches_the_daemon_and_the_exit_is_told(runtime: Path, keeper: subprocess.Popen[bytes]) -> None:
    control = Control(runtime)
    control.hello()
    spawn(control, "s1", [*COUNTER, "500"])
    out = control.attach("s1", "out", 0)
    assert read_to_eof(out) == expected(500)
    assert control.exited("s1")["code"] == 0


def test_a_daemon_that_dies_mid_stream_loses_and_repeats_nothing(runtime: Path,
                                                                 keeper: subprocess.Popen[bytes]) -> None:
    """The first daemon reads some lines, stores part of them and dies; the next one asks from what it stored and
    gets exactly the rest, though the agent wrote on meanwhile."""
    control = Control(runtime)
    control.hello()
    spawn(control, "s1", [*COUNTER, "20000"])
    out = control.attach("s1", "out", 0)
    seen = read_until(out, b"line 00001000")
    stored = seen.rindex(b"\n", 0, seen.index(b"line 00000500")) + 1  # what the first daemon got into its store
    control.ask("stored", sid="s1", out=[stored, 500], err=0)
    out.close()
    control.close()  # the daemon dies: nothing after `stored` was stored

    control = Control(runtime)
    sessions = control.hello()
    assert [s["sid"] for s in sessions] == ["s1"]
    assert sessions[0]["out"][0] == stored  # what the keeper still holds starts where the store ends
    control.ask("take", sid="s1", seq=500)
    out = control.attach("s1", "out", stored)
    assert read_to_eof(out) == expected(20000)[stored:]
    assert control.exited("s1")["code"] == 0


def test_without_a_daemon_what_the_agent_writes_waits_bounded_in_bytes(runtime: Path,
                                                                        keeper: subprocess.Popen[bytes]) -> None:
    """An agent writing 100 MB with no daemon attached blocks in its write once the keeper holds its bound; the
    keeper's memory stays bounded, and everything arrives once a daemon reads again."""
    control = Control(runtime)
    control.hello()
    count = 2_000_000  # 100 MB of lines
    spawn(control, "s1", [*COUNTER, str(count)])
    control.close()
    control = Control(runtime)
    held = wait_for(lambda: _held_when_still(control), 60, "the keeper to stop reading")
    assert KEEP_BYTES <= held <= KEEP_BYTES + READ_SIZE  # the bound, passed by one read at most
    assert psutil.Process(keeper.pid).memory_info().rss < 120 << 20
    out = control.attach("s1", "out", 0)
    total = 0
    while chunk := out.recv(1 << 20):
        total += len(chunk)
        if total % KEEP_BYTES < len(chunk):
            control.ask("stored", sid="s1", out=[total, 0], err=0)
    assert total == len(expected(1)) * count


def _held_when_still(control: Control) -> int:
    """The bytes the keeper holds, once they stopped growing for a moment (the agent is blocked)."""
    first = control.hello()[0]["out"]
    time.sleep(0.3)  # (the condition itself: unchanged over this interval)
    second = control.hello()[0]["out"]
    return second[1] - second[0] if first == second and second[1] > 0 else 0


def test_stdin_waits_until_the_line_it_answers_is_stored(runtime: Path, keeper: subprocess.Popen[bytes]) -> None:
    control = Control(runtime)
    control.hello()
    spawn(control, "s1", [*COUNTER, "1", "--echo"])
    out = control.attach("s1", "out", 0)
    stdin = control.attach("s1", "in")
    assert read_until(out, b"\n") == expected(1)
    stdin.sendall(wire.frame(1, b"answer one\n"))
    out.settimeout(0.5)
    with pytest.raises(TimeoutError):
        out.recv(100)  # line 1 is not stored: its answer waits
    control.ask("stored", sid="s1", out=[len(expected(1)), 1], err=0)
    out.settimeout(10)
    assert read_until(out, b"\n") == b"got: answer one\n"
    stdin.sendall(wire.frame(1, b""))  # closes its stdin: the agent ends
    assert control.exited("s1")["code"] == 0


def test_answers_to_lines_the_store_never_took_are_dropped(runtime: Path,
                                                           keeper: subprocess.Popen[bytes]) -> None:
    """A daemon judged line 2 and queued its answer, then died before line 2 was stored: the next daemon reads line
    2 again and answers it itself, so the first answer must never reach the agent."""
    control = Control(runtime)
    control.hello()
    spawn(control, "s1", [*COUNTER, "2", "--echo"])
    stdin = control.attach("s1", "in")
    stdin.sendall(wire.frame(2, b"first daemon\n"))
    control.ask("stored", sid="s1", out=[len(expected(1)), 1], err=0)
    stdin.close()
    control.close()
    control = Control(runtime)
    sessions = control.hello()
    control.ask("take", sid="s1", seq=1)
    stdin = control.attach("s1", "in")
    stdin.sendall(wire.frame(2, b"second daemon\n"))
    control.ask("stored", sid="s1", out=[len(expected(2)), 2], err=0)
    out = control.attach("s1", "out", len(expected(2)))
    assert read_until(out, b"\n") == b"got: second daemon\n"
    assert sessions[0]["stdin_dropped"] == 0
    assert control.hello()[0]["stdin_dropped"] == 1


def test_max_runtime_is_enforced_with_no_daemon(runtime: Path, keeper: subprocess.Popen[bytes]) -> None:
    control = Control(runtime)
    control.hello()
    pid = spawn(control, "s1", [sys.executable, "-c", "import time; time.sleep(600)"], max_runtime=1.0, grace=1.0)
    control.close()
    wait_for(lambda: gone(pid), 20, "the agent to be ended by its max_runtime")
    control = Control(runtime)
    session = control.hello()[0]
    assert session["reason"] == "max_runtime"
    assert session["code"] == -signal.SIGTERM


def test_a_max_runtime_changed_later_moves_the_keepers_own_deadline(runtime: Path,
                                                                      keeper: subprocess.Popen[bytes]) -> None:
    """`loopwarden set limits.max_runtime` on a kept session: the keeper's deadline follows, later or sooner."""
    control = Control(runtime)
    control.hello()
    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    later = spawn(control, "s1", sleep, max_runtime=1.0, grace=1.0)
    sooner = spawn(control, "s2", sleep, max_runtime=600.0, grace=1.0)
    control.ask("limit", sid="s1", max_runtime=600.0)
    control.ask("limit", sid="s2", max_runtime=1.0)
    control.close()
    wait_for(lambda: gone(sooner), 20, "the agent whose max_runtime was cut to end")
    assert not gone(later)  # its first deadline passed long ago
    control = Control(runtime)
    reasons = {s["sid"]: s["reason"] for s in control.hello()}
    assert reasons == {"s1": None, "s2": "max_runtime"}
    control.ask("signal", sid="s1", sig=signal.SIGKILL)


def test_a_dead_daemon_is_started_again_and_only_then_are_agents_stopped(runtime: Path) -> None:
    """A daemon that never comes back: the keeper starts it RESTARTS times, then stops its agents and exits."""
    starts = runtime / "starts"
    keeper = start_keeper(runtime, "--restarts", "2", "--daemon-wait", "0.5")
    try:
        control = Control(runtime)
        daemon = [sys.executable, "-c", f"open({str(starts)!r}, 'a').write('x')"]
        control.hello(argv=daemon, env={"PATH": os.environ["PATH"]}, cwd="/")
        pid = spawn(control, "s1", [sys.executable, "-c", "import time; time.sleep(600)"], grace=1.0)
        control.close()  # the daemon dies without a bye
        wait_for(lambda: gone(pid), 30, "the agent to be stopped once no daemon came back")
        assert keeper.wait(30) == 0
        assert starts.read_text() == "xx"
    finally:
        if keeper.poll() is None:
            keeper.kill()


def test_a_daemon_that_comes_back_keeps_every_agent(runtime: Path) -> None:
    keeper = start_keeper(runtime, "--restarts", "1", "--daemon-wait", "30")
    try:
        control = Control(runtime)
        daemon = [sys.executable, "-c", "pass"]
        control.hello(argv=daemon, env={"PATH": os.environ["PATH"]})
        pid = spawn(control, "s1", [sys.executable, "-c", "import time; time.sleep(600)"])
        os.kill(pid, 0)
        control.close()
        control = Control(runtime)  # the next daemon
        assert [s["pid"] for s in control.hello(argv=daemon)] == [pid]
        assert not gone(pid)
        control.ask("signal", sid="s1", sig=signal.SIGKILL)
        assert control.exited("s1")["code"] == -signal.SIGKILL
    finally:
        keeper.kill()
        keeper.wait(10)


def test_an_agent_may_not_talk_to_its_keeper(runtime: Path, keeper: subprocess.Popen[bytes]) -> None:
    """A kept agent connecting to the keeper's socket is refused before it can ask anything."""
    control = Control(runtime)
    control.hello()
    knock = "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(s.recv(200).decode())"
    spawn(control, "s1", [sys.executable, "-c", knock, str(runtime / wire.SOCKET_NAME)])
    out = control.attach("s1", "out", 0)
    said = read_to_eof(out)
    assert b"may not talk to its keeper" in said


def test_one_output_connection_carries_every_stream_and_loses_nothing_when_its_daemon_dies(
        runtime: Path, keeper: subprocess.Popen[bytes]) -> None:
    """Two agents' stdout as channels of one output connection, each whole and in order; the daemon dies after
    storing part of one, and the next daemon's channel from there gets exactly the rest."""
    control = Control(runtime)
    control.hello()
    spawn(control, "s1", [*COUNTER, "20000"])
    spawn(control, "s2", [*COUNTER, "3000"])
    output = OutputConnection(control)
    one, two = output.attach("s1", "out"), output.attach("s2", "out")
    output.read_until(lambda: two in output.ended and b"line 00001000" in output.received[one],
                      credit=frozenset({one, two}))
    assert bytes(output.received[two]) == expected(3000)
    seen = bytes(output.received[one])
    assert expected(20000).startswith(seen)
    stored = seen.rindex(b"\n", 0, seen.index(b"line 00000500")) + 1
    control.ask("stored", sid="s1", out=[stored, 500], err=0)
    output.close()
    control.close()  # the daemon dies: nothing after `stored` was stored

    control = Control(runtime)
    assert [s["sid"] for s in control.hello()] == ["s1", "s2"]
    control.ask("take", sid="s1", seq=500)
    output = OutputConnection(control)
    again = output.attach("s1", "out", stored)
    output.read_until(lambda: again in output.ended, credit=frozenset({again}))
    assert bytes(output.received[again]) == expected(20000)[stored:]
    assert control.exited("s1")["code"] == 0


def test_a_channel_out_of_credit_waits_alone(runtime: Path, keeper: subprocess.Popen[bytes]) -> None:
    """A channel the daemon gives no more credit stops at its first credit, while another channel runs to its
    end; credit given later lets the first one finish, nothing lost."""
    control = Control(runtime)
    control.hello()
    spawn(control, "big", [*COUNTER, "40000"])  # 2 MB
    spawn(control, "small", [*COUNTER, "2000"])
    output = OutputConnection(control)
    big, small = output.attach("big", "out"), output.attach("small", "out")
    output.read_until(lambda: small in output.ended and len(output.received[big]) >= wire.FIRST_CREDIT,
                      credit=frozenset({small}))
    assert bytes(output.received[small]) == expected(2000)
    assert len(output.received[big]) == wire.FIRST_CREDIT  # no byte past its credit
    output.read_until(lambda: big in output.ended, credit=frozenset({big}))
    assert bytes(output.received[big]) == expected(40000)
