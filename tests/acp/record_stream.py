"""Record an ACP agent's stdout for replay tests: `python -m tests.acp.record_stream OUT`.

The fake ACP agent (tests/agents/fake_acp_agent.py, mode `loop`) runs driven by the acp adapter itself:
its first five permission requests are allowed, the sixth rejected; the turn then ends and stdin closes.
The file is test data, not a fixture to edit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loopwarden.sessions.acp import AcpAdapter
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.verdicts import Action, Verdict
from tests.acp.helpers import FAKE

ALLOWED = 5


def record(out: Path) -> None:
    adapter = AcpAdapter()
    adapter.cwd = "/work"
    argv = adapter.command([sys.executable, FAKE, "loop", "--", "say looping"])
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={"FAKE_ACP_CALLS": "10"})
    assert proc.stdin and proc.stdout
    block = Verdict(action=Action.BLOCK, rule="repetition", reason="loop", message="stop repeating")
    calls = 0

    def write(data: bytes) -> None:
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
                    calls += 1
                    write(adapter.verdict_line(event, block if calls > ALLOWED else None) or b"")
            for data in adapter.replies(False):
                write(data)
            if adapter.parser.turns:
                break
    proc.stdin.close()
    proc.wait(10)


if __name__ == "__main__":
    record(Path(sys.argv[1]))
