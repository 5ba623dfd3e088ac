"""`loopwarden hook install` / `uninstall` on temporary Claude Code settings files."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from tests.support.paths import PY

EVENTS = ["PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "Stop", "SessionStart",
          "SessionEnd"]
THEIRS = {"type": "command", "command": "python3 /opt/audit.py", "timeout": 5}
SETTINGS = {"model": "opus", "permissions": {"allow": ["Bash(ls:*)"]},
            "hooks": {"PreToolUse": [{"matcher": "Edit|Write", "hooks": [THEIRS]}],
                      "Notification": [{"hooks": [THEIRS]}]}}


def lw_hook(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run([PY, "-m", "loopwarden", "hook", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def backup_named(out: str) -> Path:
    """The backup a run's output names."""
    found = re.search(r"the old file is in (\S+\.loopwarden-\d{8}T\d{6}Z(-\d+)?\.bak)$", out, re.MULTILINE)
    assert found, out
    return Path(found.group(1))


def ours(settings: dict[str, Any]) -> dict[str, list[str]]:
    """Event -> the loopwarden commands installed for it."""
    return {event: [h["command"] for g in groups for h in g.get("hooks", []) if "hook claude-code" in h["command"]]
            for event, groups in settings.get("hooks", {}).items()}


def test_install_into_a_new_project_file_points_at_this_loopwarden(tmp_path: Path) -> None:
    done = lw_hook(tmp_path, tmp_path, "install", "--project")
    assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    commands = ours(settings)
    assert sorted(commands) == sorted(EVENTS) and all(len(c) == 1 for c in commands.values())
    command = commands["PreToolUse"][0]
    program = shlex.split(command)[0]
    assert Path(program).is_absolute() and os.access(program, os.X_OK)
    assert shlex.split(command)[-2:] == ["hook", "claude-code"]
    pre = settings["hooks"]["PreToolUse"][0]
    assert pre["matcher"] == "*" and pre["hooks"][0]["timeout"] >= 120
    assert "matcher" not in settings["hooks"]["Stop"][0]
    assert not list((tmp_path / ".claude").glob("*.bak")) and "the old file" not in done.stdout  # nothing to back up


def test_install_keeps_every_other_setting_and_hook_is_idempotent_and_backs_up(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    original = json.dumps(SETTINGS, indent=4)
    path.write_text(original)
    done = lw_hook(tmp_path, tmp_path, "install")  # --project is the default
    assert done.returncode == 0
    settings = json.loads(path.read_text())
    assert {k: v for k, v in settings.items() if k != "hooks"} == {k: v for k, v in SETTINGS.items() if k != "hooks"}
    assert settings["hooks"]["PreToolUse"][0] == SETTINGS["hooks"]["PreToolUse"][0]
    assert settings["hooks"]["Notification"] == SETTINGS["hooks"]["Notification"]
    first = backup_named(done.stdout)
    assert first.parent == path.parent and first.read_text() == original
    installed = path.read_bytes()

    again = lw_hook(tmp_path, tmp_path, "install")
    assert again.returncode == 0 and "already installed" in again.stdout
    assert path.read_bytes() == installed
    assert list(path.parent.glob("*.bak")) == [first] and first.read_text() == original  # no change, no backup

    done = lw_hook(tmp_path, tmp_path, "uninstall")
    assert done.returncode == 0 and "removed" in done.stdout
    assert path.read_text() == original
    second = backup_named(done.stdout)
    assert second != first and second.read_bytes() == installed and first.read_text() == original
    assert "no loopwarden hooks" in lw_hook(tmp_path, tmp_path, "uninstall").stdout


def test_install_replaces_a_hook_of_another_loopwarden_installation(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    old = {"type": "command", "command": "/old/venv/bin/loopwarden hook claude-code"}
    path.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [old, THEIRS]}]}}))
    assert lw_hook(tmp_path, tmp_path, "install").returncode == 0
    settings = json.loads(path.read_text())
    assert settings["hooks"]["Stop"][0]["hooks"] == [THEIRS]
    assert len(ours(settings)["Stop"]) == 1 and "/old/venv" not in ours(settings)["Stop"][0]
    lw_hook(tmp_path, tmp_path, "uninstall")
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [THEIRS]}]}}


def test_user_scope_and_an_explicit_file(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    assert lw_hook(home, work, "install", "--user").returncode == 0
    assert sorted(ours(json.loads((home / ".claude" / "settings.json").read_text()))) == sorted(EVENTS)
    assert not (work / ".claude").exists()
    local = work / ".claude" / "settings.local.json"
    missing = lw_hook(home, work, "install", "--file", str(local))  # --file makes no directories
    assert missing.returncode == 2 and not (work / ".claude").exists()
    assert missing.stderr == (f"loopwarden: error: --file {local}: the directory {work / '.claude'} does not exist "
                              "(only the .claude directories of --project and --user are created)\n")
    (work / ".claude").mkdir()
    assert lw_hook(home, work, "install", "--file", str(local)).returncode == 0
    assert sorted(ours(json.loads(local.read_text()))) == sorted(EVENTS)
    assert lw_hook(home, work, "uninstall", "--user").returncode == 0
    assert json.loads((home / ".claude" / "settings.json").read_text()) == {}


def test_a_malformed_settings_file_is_a_one_line_error_that_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    for text in ('{"model": "opus",', "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": {}}}', "\udcff"):
        data = text.encode("utf-8", "surrogatepass")
        path.write_bytes(data)
        for action in ("install", "uninstall"):
            done = lw_hook(tmp_path, tmp_path, action)
            assert done.returncode == 2 and done.stdout == ""
            assert done.stderr.startswith("loopwarden: error: ") and done.stderr.count("\n") == 1, done.stderr
            assert "nothing was changed" in done.stderr
            assert path.read_bytes() == data
        assert list(path.parent.iterdir()) == [path]  # no backup, no temporary file left
