"""The keeper as a pod runs it: from its zip with the standard library alone, reached through the bridge a
command run in the pod is (stdin and stdout spliced to its socket), holding an agent while no daemon is attached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopwarden.runtime.pods.keeper_zip import keeper_zip
from tests.keeper.wire_client import start_keeper
from tests.support.processes import gone
from tests.support.waiting import wait_for

AGENTS = Path(__file__).resolve().parent.parent / "agents"


@pytest.fixture
def zipped(tmp_path: Path) -> Path:
    path = tmp_path / "keeper.pyz"
    path.write_bytes(keeper_zip())
    return path


def bridge(zipped: Path, socket_path: Path) -> subprocess.Popen[bytes]:
    """The bridge from the zip, as the daemon runs it in a pod: an isolated interpreter without site-packages."""
    return subprocess.Popen([sys.executable, "-I", "-S", str(zipped), "bridge", str(socket_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def ask(proc: subprocess.Popen[bytes], *lines: dict[str, object]) -> dict[str, object]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    proc.stdin.flush()
    return dict(json.loads(proc.stdout.readline()))


def test_the_zip_runs_the_keeper_with_the_standard_library_alone(zipped: Path) -> None:
    said = subprocess.run([sys.executable, "-I", "-S", str(zipped), "--help"], capture_output=True, text=True,
                          timeout=30, check=False)
    assert said.returncode == 0 and "--first-wait" in said.stdout, said.stderr
    assert keeper_zip() == keeper_zip.__wrapped__()  # the same sources, the same bytes: one ConfigMap a version


def test_a_daemon_reaches_the_keeper_through_the_bridge_and_the_keeper_holds_its_agent_after_it_leaves(
        tmp_path: Path, zipped: Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    keeper = start_keeper(runtime, "--restarts", "0", "--daemon-wait", "600", "--first-wait", "600")
    try:
        link = bridge(zipped, runtime / "keeper.sock")
        hello = ask(link, {"op": "control"}, {"op": "hello", "id": 1, "daemon": {}})
        assert hello["id"] == 1 and hello["generation"] == 1 and hello["sessions"] == []
        spawned = ask(link, {"op": "spawn", "id": 2, "sid": "s1", "argv": [sys.executable, "-c",
                                                                             "import time; time.sleep(600.41)"],
                             "env": {}, "cwd": str(tmp_path), "max_runtime": None, "grace": 1})
        assert isinstance(spawned.get("pid"), int)
        assert link.stdin is not None
        link.stdin.close()  # the link is down: the exec ended
        assert link.wait(timeout=30) == 0
        # a second daemon (the link back up) finds the agent still held
        again = bridge(zipped, runtime / "keeper.sock")
        back = ask(again, {"op": "control"}, {"op": "hello", "id": 1, "daemon": {}})
        assert [s["sid"] for s in back["sessions"]] == ["s1"] and back["generation"] == 2  # type: ignore[union-attr]
        assert again.stdin is not None
        again.stdin.close()
        again.wait(timeout=30)
    finally:
        keeper.terminate()
        wait_for(lambda: gone(keeper.pid), 30, "the keeper to stop its agent and exit")


def test_the_bridge_says_in_one_line_when_no_keeper_answers(tmp_path: Path, zipped: Path) -> None:
    said = subprocess.run([sys.executable, "-I", "-S", str(zipped), "bridge", str(tmp_path / "none.sock"),
                           "--wait", "0.3"], capture_output=True, text=True, timeout=60, check=False, input="")
    assert said.returncode == 2
    assert said.stderr.count("\n") == 1 and "cannot be reached" in said.stderr
