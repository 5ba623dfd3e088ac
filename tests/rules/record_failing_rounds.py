"""Record the real Claude Code, Codex and Gemini CLIs failing the same test round after round, for replay tests:
`python -m tests.rules.record_failing_rounds claude|codex|gemini|claude-acp OUT`.

Each CLI runs on its fake model server (tests/fakes, tests/codex, tests/gemini), in a temporary directory holding
`test_calc.py`: four tests, each passing once its letter is in `fixed.txt`. The model's replies are scripted
(ROUNDS): run the tests, fix one test, run them again (4, 3, 2 then 1 failing: the failures shrink), then run
them four more times unchanged (the same failure repeating), then give up (Gemini: see `record_gemini`).
Every call is allowed. The file
written is the CLI's own stdout, byte for byte: test data, not a fixture to edit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = "python3 -m unittest test_calc"
ROUNDS = [RUN, "echo a >> fixed.txt", RUN, "echo b >> fixed.txt", RUN, "echo c >> fixed.txt", RUN, RUN, RUN, RUN]
GEMINI_READS = 5
GIVE_UP = "test_d still fails; I cannot fix it."
PROMPT = "make the tests in test_calc.py pass"
TEST_CALC = '''import pathlib
import unittest

FIXED = pathlib.Path("fixed.txt").read_text().split() if pathlib.Path("fixed.txt").exists() else []


class CalcTest(unittest.TestCase):
    def test_a(self):
        self.assertIn("a", FIXED)

    def test_b(self):
        self.assertIn("b", FIXED)

    def test_c(self):
        self.assertIn("c", FIXED)

    def test_d(self):
        self.assertIn("d", FIXED)
'''
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
         "DISABLE_ERROR_REPORTING": "1"}


def workdir(root: Path) -> Path:
    work = root / "work"
    work.mkdir()
    (work / "test_calc.py").write_text(TEST_CALC)
    return work


def record_claude(out: Path, root: Path) -> None:
    from loopwarden.sessions.claude_launch import bundled_binary
    from tests.fakes.anthropic_server import FakeAnthropic, assistant_turns, call, say

    def script(body: dict) -> object:
        n = assistant_turns(body)
        return call("Bash", {"command": ROUNDS[n], "description": "run"}) if n < len(ROUNDS) else say(GIVE_UP)

    home = root / "home"
    home.mkdir()
    with FakeAnthropic(script, max_turns=len(ROUNDS) + 2) as fake:
        env = {"PATH": os.environ["PATH"], "HOME": str(home), **fake.env(), **QUIET}
        argv = [bundled_binary() or "claude", "-p", "--output-format", "stream-json", "--verbose",
                "--max-turns", "20", "--allowedTools", "Bash", "--", PROMPT]
        with out.open("wb") as f:
            subprocess.run(argv, cwd=workdir(root), env=env, stdout=f, stdin=subprocess.DEVNULL, timeout=300,
                           check=False)


def record_codex(out: Path, root: Path) -> None:
    from tests.codex.codex_home import codex_binary, codex_env, write_codex_home
    from tests.codex.fake_responses import FakeResponses, run, say

    with FakeResponses(max_replies=len(ROUNDS) + 2) as fake:
        fake.play([*(run(cmd) for cmd in ROUNDS), say(GIVE_UP)])
        home = write_codex_home(root / "codex-home", fake.url)
        argv = [codex_binary() or "codex", "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", PROMPT]
        with out.open("wb") as f:
            subprocess.run(argv, cwd=workdir(root), env=codex_env(home), stdout=f, stdin=subprocess.DEVNULL,
                           timeout=300, check=False)


def record_gemini(out: Path, root: Path) -> None:
    """Gemini CLI over ACP reports a shell call as completed with no output or exit code (its shell result has
    no text to show), so its failing test runs are not seen; a call of its own tools that fails is (status
    failed, the error as content): the model reads a file that is not there, GEMINI_READS times."""
    from tests.agents import npm_agents
    from tests.gemini.fake_gemini import FakeGemini, call, say
    from tests.gemini.gemini_home import gemini_env, write_gemini_home

    work = workdir(root)
    with FakeGemini(max_replies=len(ROUNDS) + 2) as fake:
        fake.play([*(call("read_file", file_path="calc.py") for _ in range(GEMINI_READS)), say(GIVE_UP)])
        env = gemini_env(write_gemini_home(root / "gemini-home"), fake.url, GEMINI_CLI_NO_RELAUNCH="true",
                         LOOPWARDEN_GEMINI=npm_agents.gemini_bin(npm_agents.install()) or "gemini")
        _drive_acp("gemini", env, work, out)


def _drive_acp(agent: str, env: dict[str, str], work: Path, out: Path) -> None:
    """Launch `agent` over ACP as loopwarden would, every call allowed, and record its stream to `out`."""
    from loopwarden.sessions import acp_agents
    from loopwarden.sessions.acp import AcpAdapter
    from tests.acp.record_stream import drive

    words = acp_agents.shortcut_words(agent, [PROMPT], env, str(work))
    env.update(acp_agents.launch_env(words, env, str(work)))
    adapter = AcpAdapter()
    adapter.cwd = str(work)
    proc = subprocess.Popen(adapter.command(words), cwd=work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    drive(adapter, proc, out, lambda call: None)  # every call allowed
    proc.wait(30)


def record_claude_acp(out: Path, root: Path) -> None:
    """claude-agent-acp (Claude Code over ACP) on the fake Messages API, the same ROUNDS as Claude Code."""
    from tests.agents import npm_agents
    from tests.fakes.anthropic_server import FakeAnthropic, assistant_turns, call, say

    def script(body: dict) -> object:
        n = assistant_turns(body)
        return call("Bash", {"command": ROUNDS[n], "description": "run"}) if n < len(ROUNDS) else say(GIVE_UP)

    work = workdir(root)
    home = root / "home"
    home.mkdir()
    with FakeAnthropic(script, max_turns=len(ROUNDS) + 4) as fake:
        env = {"PATH": os.environ["PATH"], "HOME": str(home), **fake.env(), **QUIET,
               "LOOPWARDEN_CLAUDE_ACP": npm_agents.claude_acp_bin(npm_agents.install()) or "claude-agent-acp"}
        _drive_acp("claude-acp", env, work, out)


if __name__ == "__main__":
    agent, target = sys.argv[1], Path(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        {"claude": record_claude, "codex": record_codex, "gemini": record_gemini,
         "claude-acp": record_claude_acp}[agent](target, Path(tmp))
