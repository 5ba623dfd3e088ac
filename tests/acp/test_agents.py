"""Known ACP agents: `run --agent NAME -- PROMPT`, the binary's search order, the environment they get,
and the console's launch dialog offering them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from textual.widgets import Input, Select

from loopwarden.sessions import acp_agents, acp_gemini, registry
from loopwarden.sessions.acp import AcpAdapter
from loopwarden.widgets.dialogs import Launch
from tests.acp.helpers import FAKE, report
from tests.console.helpers import RecordingConsole, until
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for


def script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_the_binary_comes_from_the_override_then_path_then_the_project_folder(tmp_path: Path) -> None:
    gemini = acp_agents.AGENTS["gemini"]
    assert gemini.find({"LOOPWARDEN_GEMINI": "/x/gemini", "PATH": ""}) == "/x/gemini"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    on_path = script(bin_dir / "gemini", "exit 0")
    assert gemini.find({"PATH": str(bin_dir)}) == on_path
    local = tmp_path / "agents" / "node_modules" / ".bin"
    local.mkdir(parents=True)
    npm_bin = script(local / "claude-agent-acp", "exit 0")
    claude = acp_agents.AGENTS["claude-acp"]
    assert claude.find({"PATH": "", acp_agents.ENV_AGENTS_DIR: str(tmp_path / "agents")}) == npm_bin


def test_shortcut_words_and_one_line_errors(tmp_path: Path) -> None:
    env = {"LOOPWARDEN_GEMINI": "/x/gemini", "PATH": "", "LOOPWARDEN_HOME": str(tmp_path), "HOME": str(tmp_path)}
    words = acp_agents.shortcut_words("gemini", ["fix", "it"], env, "/w")
    # Gemini's layer: its policy file in loopwarden's data dir (sessions/acp_gemini.py)
    assert words == ["/x/gemini", "--acp", *acp_gemini.gemini_args(Path(words[-4]), env), "--", "fix", "it"]
    assert Path(words[-4]).parent == tmp_path / "data" / "gemini"
    with pytest.raises(ValueError, match="unknown ACP agent 'nope'"):
        acp_agents.shortcut_words("nope", ["go"], env, "/w")
    with pytest.raises(ValueError, match=r"cannot find opencode.*LOOPWARDEN_OPENCODE") as info:
        acp_agents.shortcut_words("opencode", ["go"], {"PATH": "", acp_agents.ENV_AGENTS_DIR: "/nonexistent"}, "/w")
    assert "\n" not in str(info.value)


def test_a_known_agent_gets_its_environment_whoever_typed_its_command(tmp_path: Path) -> None:
    env: dict[str, str] = {"PATH": "", "LOOPWARDEN_HOME": str(tmp_path)}  # Gemini's layer writes its policy there
    assert AcpAdapter.launch_env(["/opt/bin/gemini", "--acp", "--", "go"], env, "/w") == {
        "GEMINI_CLI_NO_RELAUNCH": "true"}
    assert AcpAdapter.launch_env(["node", "/n/claude-agent-acp/dist/index.js", "--", "go"], env, "/w") == {}
    assert acp_agents.agent_of(["node", "/n/claude-agent-acp/dist/index.js"], env) is acp_agents.AGENTS["claude-acp"]
    assert AcpAdapter.launch_env([PY, "agent.py", "--", "go"], env, "/w") == {}


def test_a_known_agent_is_prepared_in_one_place_for_run_and_the_launch_dialog(tmp_path: Path) -> None:
    """`run --agent` and the dialog's `agent:NAME` both ask the registry, which asks the adapter that knows it."""
    env = {"LOOPWARDEN_GEMINI": "/x/gemini", "PATH": "", "LOOPWARDEN_HOME": str(tmp_path), "HOME": str(tmp_path)}
    assert registry.known_agents() == {name: AcpAdapter for name in acp_agents.AGENTS}
    launch = registry.prepare_launch("auto", ["fix", "it"], env, "/w", agent="gemini")
    words = acp_agents.shortcut_words("gemini", ["fix", "it"], env, "/w")
    assert launch == registry.Launch("acp", AcpAdapter.launch_command(words, env), {"GEMINI_CLI_NO_RELAUNCH": "true"})
    assert launch.command[-2:] == ["--", "fix it"]
    assert registry.prepare_launch("acp", ["fix", "it"], env, "/w", agent="gemini") == launch
    with pytest.raises(ValueError, match=r"^--agent gemini runs the acp adapter; leave out --adapter codex$"):
        registry.prepare_launch("codex", ["go"], env, "/w", agent="gemini")
    with pytest.raises(ValueError, match=r"^unknown agent 'nope'; known: gemini, opencode, claude-acp$"):
        registry.prepare_launch("auto", ["go"], env, "/w", agent="nope")
    plain = registry.prepare_launch("plain", ["make", "test"], env, "/w")
    assert plain == registry.Launch("plain", ["make", "test"], {})


def test_run_agent_gemini_starts_the_override_with_acp_and_its_environment(acp: Harness, tmp_path: Path) -> None:
    fake = script(tmp_path / "gemini", f'FAKE_ACP_MODE=once exec "{PY}" "{FAKE}" "$@"')
    done = subprocess.run([PY, "-m", "loopwarden", "run", "-d", "--agent", "gemini", "--", "make a marker"],
                          env={**acp.env, "LOOPWARDEN_GEMINI": fake}, cwd=acp.work,  # type: ignore[attr-defined]
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    snap = acp.wait_state(done.stdout.strip(), "exited", "terminated", timeout=30)
    assert (snap["state"], snap["adapter"], snap["exit_code"]) == ("exited", "acp", 0), snap
    [new] = [r for r in report(acp) if "session_new" in r]
    assert new["argv"][0] == "--acp" and new["argv"][1] in ("--admin-policy", "--policy")  # the layer
    assert new["no_relaunch"] == "true"
    assert new["session_new"]["cwd"] == str(acp.work)  # type: ignore[attr-defined]
    assert (acp.work / "held-marker").exists()  # type: ignore[attr-defined]


def test_run_agent_refuses_another_adapter_in_one_line(acp: Harness) -> None:
    done = acp.cli("run", "--agent", "gemini", "--adapter", "codex", "--", "go")
    assert done.returncode != 0 and "leave out --adapter codex" in done.stderr


@pytest.mark.anyio
async def test_the_launch_dialog_offers_the_known_agents(acp: Harness, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fake = script(tmp_path / "gemini", f'FAKE_ACP_MODE=once exec "{PY}" "{FAKE}" "$@"')
    monkeypatch.setenv("LOOPWARDEN_GEMINI", fake)
    monkeypatch.setenv("LOOPWARDEN_HOME", str(acp.home))  # where Gemini's layer writes its policy file
    monkeypatch.setenv("FAKE_ACP_REPORT", str(acp.report))  # type: ignore[attr-defined]
    monkeypatch.chdir(acp.work)  # type: ignore[attr-defined]
    app = RecordingConsole(acp.paths, autostart=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.feed.ready, what="the feed")
        await pilot.press("n")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")
        dialog.query_one("#adapter", Select).value = "agent:gemini"
        dialog.query_one("#command", Input).value = "don't stop: make a marker"
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, Launch), what="the dialog to close")
    wait_for(lambda: any(r.get("prompt") == "don't stop: make a marker" for r in report(acp)), 20, "the prompt")
    assert [r["no_relaunch"] for r in report(acp) if "session_new" in r] == ["true"]
