"""`loopwarden hook install/uninstall --agent codex` on a private CODEX_HOME, checked by the real Codex."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest

from .helpers import hooks_list, lw_hook

pytestmark = pytest.mark.timeout(90)

CONFIG = """\
# the user's own Codex config: comments and layout must survive
model = "gpt-5.5"   # their model
approval_policy = "on-request"

[projects."/srv/app"]
trust_level = "trusted"

[hooks.state."/elsewhere/hooks.json:stop:0:0"]
trusted_hash = "sha256:0000"  # trust they gave another hook
"""
THEIRS = {"type": "command", "command": "/opt/audit.sh", "timeout": 5}
HOOKS = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [THEIRS]}],
                   "Stop": [{"hooks": [THEIRS]}]}}


def backups_named(out: str) -> dict[str, Path]:
    """File name -> the backup a run's output names for it."""
    paths = [Path(p) for p in re.findall(r"(/\S+\.loopwarden-\d{8}T\d{6}Z(?:-\d+)?\.bak)", out)]
    return {p.name.partition(".loopwarden-")[0]: p for p in paths}


def ours(hooks: dict[str, Any]) -> list[dict[str, Any]]:
    return [h for g in hooks.get("hooks", {}).get("PreToolUse", []) for h in g["hooks"]
            if h["command"].endswith("hook codex")]


def codex_home_with(tmp_path: Path, config: str | None = CONFIG, hooks: dict[str, Any] | None = HOOKS) -> Path:
    home = tmp_path / "codex-home"
    home.mkdir()
    if config is not None:
        (home / "config.toml").write_text(config)
    if hooks is not None:
        (home / "hooks.json").write_text(json.dumps(hooks))
    return home


def test_install_is_idempotent_backs_up_keeps_the_users_hooks_and_uninstall_restores(tmp_path: Path) -> None:
    home = codex_home_with(tmp_path)
    hooks_text = (home / "hooks.json").read_text()
    done = lw_hook(home, tmp_path, "install", "--agent", "codex")
    assert done.returncode == 0, done.stderr
    assert "installed the loopwarden PreToolUse hook" in done.stdout
    hooks = json.loads((home / "hooks.json").read_text())
    assert hooks["hooks"]["Stop"] == HOOKS["hooks"]["Stop"]
    assert hooks["hooks"]["PreToolUse"][0] == HOOKS["hooks"]["PreToolUse"][0]  # theirs first, at its index
    [hook] = ours(hooks)
    assert hooks["hooks"]["PreToolUse"][1]["matcher"] == "*" and hook["timeout"] >= 120
    words = shlex.split(hook["command"])
    assert words[-2:] == ["hook", "codex"] and Path(words[0]).is_absolute()
    config = (home / "config.toml").read_text()
    assert config.startswith(CONFIG)  # the user's bytes, then our table
    state = tomllib.loads(config)["hooks"]["state"]
    assert state[f"{home}/hooks.json:pre_tool_use:1:0"]["trusted_hash"].startswith("sha256:")
    assert state["/elsewhere/hooks.json:stop:0:0"] == {"trusted_hash": "sha256:0000"}
    saved = backups_named(done.stdout)
    assert saved["hooks.json"].read_text() == hooks_text and saved["config.toml"].read_text() == CONFIG
    assert {p.parent for p in saved.values()} == {home}
    installed = {p.name: p.read_bytes() for p in home.iterdir()}

    again = lw_hook(home, tmp_path, "install", "--agent", "codex")
    assert again.returncode == 0 and "already installed" in again.stdout
    assert {p.name: p.read_bytes() for p in home.iterdir()} == installed  # no change, no new backup

    done = lw_hook(home, tmp_path, "uninstall", "--agent", "codex")
    assert done.returncode == 0 and "removed the loopwarden hook" in done.stdout, done.stderr
    assert (home / "config.toml").read_text() == CONFIG
    assert (home / "hooks.json").read_text() == hooks_text
    assert backups_named(done.stdout)["config.toml"].read_bytes() == installed["config.toml"]
    assert saved["config.toml"].read_text() == CONFIG  # the first backup is still there
    assert "no loopwarden hook" in lw_hook(home, tmp_path, "uninstall", "--agent", "codex").stdout


def test_the_real_codex_sees_the_hook_trusted_and_theirs_as_before(codex_bin: str, tmp_path: Path) -> None:
    home = codex_home_with(tmp_path)
    before = {h["key"]: h["trustStatus"] for h in hooks_list(codex_bin, home, tmp_path)}
    assert lw_hook(home, tmp_path, "install", "--agent", "codex").returncode == 0
    listed = hooks_list(codex_bin, home, tmp_path)
    [mine] = [h for h in listed if h["command"].endswith("hook codex")]
    assert mine["key"] == f"{home}/hooks.json:pre_tool_use:1:0" and mine["eventName"] == "preToolUse"
    assert mine["trustStatus"] == "trusted", mine
    assert mine["currentHash"] == tomllib.loads((home / "config.toml").read_text())["hooks"]["state"][
        mine["key"]]["trusted_hash"]
    assert {h["key"]: h["trustStatus"] for h in listed if h is not mine} == before
    assert lw_hook(home, tmp_path, "uninstall", "--agent", "codex").returncode == 0
    assert {h["key"]: h["trustStatus"] for h in hooks_list(codex_bin, home, tmp_path)} == before


def test_default_codex_home_and_a_reinstall_from_another_loopwarden(tmp_path: Path) -> None:
    home = tmp_path / "user"
    (home / ".codex").mkdir(parents=True)
    old = {"type": "command", "command": "/old/venv/bin/loopwarden hook codex", "timeout": 180}
    (home / ".codex" / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "*",
                                                                                     "hooks": [old]}]}}))
    assert lw_hook(None, home, "install", "--agent", "codex").returncode == 0  # CODEX_HOME unset: ~/.codex
    hooks = json.loads((home / ".codex" / "hooks.json").read_text())
    [hook] = ours(hooks)
    assert "/old/venv" not in hook["command"] and len(hooks["hooks"]["PreToolUse"]) == 1
    state = tomllib.loads((home / ".codex" / "config.toml").read_text())["hooks"]["state"]
    assert list(state) == [f"{home}/.codex/hooks.json:pre_tool_use:0:0"]
    assert lw_hook(None, home, "uninstall", "--agent", "codex").returncode == 0
    assert json.loads((home / ".codex" / "hooks.json").read_text()) == {}
    assert (home / ".codex" / "config.toml").read_text() == ""  # it held only our trust
    assert not (home / ".claude").exists()  # the Claude Code default was not touched


@pytest.mark.parametrize(("name", "text"), [
    ("hooks.json", '{"hooks": '), ("hooks.json", '{"hooks": {"PreToolUse": {}}}'), ("hooks.json", "[1]"),
    ("config.toml", 'model = "unterminated\n'), ("config.toml", "[hooks]\nstate = 3\n"),
])
def test_an_invalid_file_is_a_one_line_error_that_changes_nothing(tmp_path: Path, name: str, text: str) -> None:
    home = codex_home_with(tmp_path)
    (home / name).write_text(text)
    files = {p.name: p.read_bytes() for p in home.iterdir()}
    for action in ("install", "uninstall") if name == "hooks.json" or "unterminated" in text else ("install",):
        done = lw_hook(home, tmp_path, action, "--agent", "codex")
        assert done.returncode == 2 and done.stdout == "", done.stdout
        assert done.stderr.startswith("loopwarden: error: ") and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr and name in done.stderr
        assert {p.name: p.read_bytes() for p in home.iterdir()} == files


def test_file_is_for_claude_code_only(tmp_path: Path) -> None:
    done = lw_hook(tmp_path, tmp_path, "install", "--agent", "codex", "--file", str(tmp_path / "x.json"))
    assert done.returncode == 2 and "--file is for Claude Code" in done.stderr
    assert not (tmp_path / "hooks.json").exists()
