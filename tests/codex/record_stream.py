"""Record a real `codex app-server` stdout stream for replay tests: `python -m tests.codex.record_stream OUT`.

The real Codex binary runs against the fake Responses API with a looping model (the same `echo`
each time), driven by the codex adapter itself: the first five approvals are accepted, the sixth
is declined with a reason (steered first), then the model gives up with a message and the turn
ends. Paths and ids are whatever that run produced; the file is test data, not a fixture to edit.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from loopwarden.sessions.codex_app import CodexAppServerAdapter
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.verdicts import Action, Verdict
from tests.codex.codex_home import codex_binary, codex_env, write_codex_home
from tests.codex.fake_responses import FakeResponses, Reply, outputs, run, say

ACCEPTED = 5


def record(out: Path) -> None:
    binary = codex_binary()
    assert binary, "pip install openai-codex-cli-bin"
    fake = FakeResponses().start()

    def script(body: dict[str, object]) -> Reply:
        declined = any("rejected" in str(o.get("output")) for o in outputs(body))
        return say("I keep repeating myself; stopping.") if declined else run("echo looping")

    fake.play(script, max_replies=12)
    work = Path(tempfile.mkdtemp(prefix="codex-record-"))
    home = write_codex_home(work / "home", fake.url)
    adapter = CodexAppServerAdapter()
    argv = adapter.command([binary, "-C", str(work), "echo looping until told otherwise"])
    proc = subprocess.Popen(argv, cwd=work, env=codex_env(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin and proc.stdout

    def send(data: bytes | None) -> None:
        if data == b"":
            proc.stdin.close()  # type: ignore[union-attr]
        elif data:
            proc.stdin.write(data)  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]

    for data in adapter.start_lines():
        send(data)
    calls = 0
    with out.open("wb") as f:
        for seq, raw in enumerate(proc.stdout, 1):
            f.write(raw)
            for event in adapter.parse_stdout(raw.rstrip(b"\n"), seq):
                if type(event) is ev.ToolCall:
                    calls += 1
                    block = Verdict(Action.BLOCK, "repetition", "the same call again",
                                    message="You ran `echo looping` 5 times with the same result; stop.")
                    send(adapter.verdict_line(event, block if calls > ACCEPTED else None))
            for data in adapter.replies(False):
                send(data)
    proc.wait(30)
    fake.stop()


if __name__ == "__main__":
    record(Path(sys.argv[1]))
