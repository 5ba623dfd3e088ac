"""Choosing the adapter (sessions/detect.py): by the command line, by the first stdout line, and the
`auto` adapter's launch command. Live sessions are in tests/live/test_adapter_choice.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopwarden.sessions import detect, registry
from loopwarden.sessions.codex_app import CodexAppServerAdapter
from loopwarden.sessions.detect import AutoAdapter, by_command, by_first_line

DATA = Path(__file__).resolve().parents[1] / "data"


def _first(path: Path) -> bytes:
    text = path.read_text()
    record = json.loads(text)[0] if text.startswith("[") else json.loads(text.splitlines()[0])
    return json.dumps(record).encode()


@pytest.mark.parametrize(("line", "adapter"), [
    (b"1", "plain"),
    (b"Compiling module 1 of 5...", "plain"),
    (b"\x1b[32mok\x1b[0m", "plain"),
    (b"{", "plain"),  # pretty-printed JSON, as `jq .` writes it
    (b"{not json", "plain"),
    (b'{"a": 1}', "plain"),
    (b'{"type": "weird"}', "plain"),
    (b'{"type": 3}', "plain"),
    (b'{"type":"hello","name":"a","protocol":1,"handshake":true}', "native"),
    (b'{"type":"tool_call","tool":"x","args":{}}', "plain"),  # only a hello commits a command to native
    (b'  {"type":"error","message":"config missing"}', "plain"),  # a structured log's words, not a protocol
    (b'{"type":"done"}', "plain"),
    (b'{"type":"hello","args":{"cut short', "native"),  # the head of an over-long line
    (_first(DATA / "claude_turns_array__claude-code-action__sample-turns.json"), "claude-stream"),
    (b'{"type":"assistant","message":{"content":[]},"session_id":"s"}', "claude-stream"),
    (b'{"type":"system"}', "plain"),  # a bare word shared by many formats is not enough
    (_first(DATA / "codex_exec_json__openai-codex-docs__exec-md-sample.jsonl"), "codex-exec"),
    (b'{"type":"item.started","item":{"id":"i1","type":"command_execution"}}', "codex-exec"),
])
def test_the_first_line_chooses(line: bytes, adapter: str) -> None:
    choice = by_first_line(line)
    assert choice.adapter == adapter, choice
    assert choice.adapter in registry.adapters() and choice.why and "\n" not in choice.line()


@pytest.mark.parametrize(("argv", "adapter"), [
    (["codex", "app-server", "-m", "gpt-5.5", "fix it"], "codex"),
    (["/opt/bin/codex", "app-server"], "codex"),
    (["codex", "exec", "--json", "fix it"], None),  # prints its own stream: chosen by its first line
    (["codex", "fix", "app-server"], None),
    (["gemini", "--acp", "--", "fix it"], "acp"),
    (["gemini", "--experimental-acp"], "acp"),
    (["gemini", "-p", "fix it"], None),  # the same program, not speaking ACP
    (["gemini", "-p", "--", "--acp"], None),  # `--acp` in the prompt does not count
    (["opencode", "acp", "--", "fix it"], "acp"),
    (["opencode", "run", "fix it"], None),
    (["claude-agent-acp", "--", "fix it"], "acp"),
    (["npx", "claude-code-acp"], "acp"),
    (["node", "/x/node_modules/@zed-industries/claude-agent-acp/dist/index.js"], "acp"),
    (["python", "agent.py"], None),
    (["claude", "-p", "fix it"], None),
])
def test_a_request_driven_agent_is_known_by_its_command_line(argv: list[str], adapter: str | None) -> None:
    choice = by_command(argv, {})
    assert (choice.adapter if choice else None) == adapter


@pytest.mark.parametrize(("argv", "closed"), [
    (["codex", "exec", "--json", "fix it"], True),
    (["/x/codex_cli_bin/bin/codex", "exec", "fix it"], True),
    (["codex", "app-server"], False),
    (["claude", "-p", "--output-format", "stream-json", "--verbose", "fix it"], True),
    (["claude", "--print", "fix it"], True),
    (["claude", "-p", "--input-format", "stream-json"], False),  # it reads its input there
    (["claude"], False),
    (["python", "agent.py", "-p"], False),
])
def test_one_shot_agent_clis_get_their_stdin_closed(argv: list[str], closed: bool) -> None:
    assert (detect.stdin_unused(argv) is not None) == closed


def test_an_override_variable_names_the_agent_too() -> None:
    assert by_command(["/tmp/my-gemini", "--acp"], {"LOOPWARDEN_GEMINI": "/tmp/my-gemini"}) is not None


def test_auto_launches_an_ordinary_command_as_typed() -> None:
    assert AutoAdapter.launch_command(["python", "agent.py", "--", "x"]) == ["python", "agent.py", "--", "x"]
    assert AutoAdapter.launch_env(["python", "agent.py"], {}, "/") == {}
    with pytest.raises(ValueError, match="no command given"):
        AutoAdapter.launch_command([])


def test_auto_launches_a_request_driven_agent_with_its_adapter_and_says_why_when_it_cannot() -> None:
    with pytest.raises(ValueError) as acp_error:
        AutoAdapter.launch_command(["opencode", "acp"])
    assert str(acp_error.value).startswith("adapter acp: the command starts opencode")
    assert "no prompt for the ACP agent" in str(acp_error.value)
    with pytest.raises(ValueError, match=r"^adapter codex: .*no prompt for Codex"):
        AutoAdapter.launch_command(["codex", "app-server", "-m", "gpt-5.5"])
    command = AutoAdapter.launch_command(["codex", "app-server", "-m", "gpt-5.5", "fix it"])
    assert command == ["codex", "app-server", "-m", "gpt-5.5", "fix it"]  # stored as typed
    adapter = CodexAppServerAdapter()
    assert adapter.command(command) == ["codex", "app-server"]  # -m is a thread setting; app-server once
    assert adapter.args.prompt == "fix it" and adapter.args.thread == {"model": "gpt-5.5"}


def test_the_silence_choice_is_plain_and_says_it_may_change() -> None:
    assert detect.silent(2).adapter == "plain" and "may still choose" in detect.silent(2).why
    assert detect.QUIET.adapter == "plain"


def test_auto_is_the_default_of_run_and_its_help_says_so() -> None:
    assert {"auto", "claude-stream", "codex-exec"} <= set(registry.adapters())
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-m", "loopwarden", "run", "--help"], capture_output=True, text=True,
                         env={**env, "COLUMNS": "200"}, timeout=60)
    text = " ".join(out.stdout.split())
    assert "[default: auto]" in text
    assert "No command is ended for not speaking loopwarden's protocol unless --adapter native asks for that" in text
