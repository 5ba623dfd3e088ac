"""Record an ACP agent's stdout for replay tests: `python -m tests.acp.record_stream OUT`.

The fake ACP agent (tests/agents/fake_acp_agent.py, mode `loop`) runs driven by the acp adapter itself:
its first five permission requests are allowed, the sixth rejected; the turn then ends and stdin closes.
The file is test data, not a fixture to edit.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from loopwarden.sessions.acp import AcpAdapter
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.verdicts import Action, Verdict
from tests.acp.helpers import FAKE

ALLOWED = 5


def drive(adapter: AcpAdapter, proc: subprocess.Popen[bytes], out: Path,
          verdict: Callable[[ev.ToolCall], Verdict | None]) -> None:
    """Talk to the agent as the adapter would (its start lines, its answers to each call by `verdict`),
    writing every line of the agent's stdout to `out` until the first turn ends; then close its stdin."""
    assert proc.stdin and proc.stdout

    def write(data: bytes | None) -> None:
        assert proc.stdin
        if data:
            proc.stdin.write(data)
            proc.stdin.flush()

    for data in adapter.start_lines():
        write(data)
    with out.open("wb") as f:
        for seq, raw in enumerate(proc.stdout, 1):
            f.write(raw)
            for event in adapter.parse_stdout(raw.rstrip(b"\n"), seq):
                if type(event) is ev.ToolCall:
                    write(adapter.verdict_line(event, verdict(event)))
            for data in adapter.replies(False):
                write(data)
            if adapter.parser.turns:
                break
    proc.stdin.close()


def record(out: Path) -> None:
    adapter = AcpAdapter()
    adapter.cwd = "/work"
    argv = adapter.command([sys.executable, FAKE, "loop", "--", "say looping"])
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={"FAKE_ACP_CALLS": "10"})
    block = Verdict(action=Action.BLOCK, rule="repetition", reason="loop", message="stop repeating")
    calls = 0

    def verdict(call: ev.ToolCall) -> Verdict | None:
        nonlocal calls
        calls += 1
        return block if calls > ALLOWED else None

    drive(adapter, proc, out, verdict)
    proc.wait(10)


if __name__ == "__main__":
    record(Path(sys.argv[1]))
