"""Claude Code's first-run answers merged into the operator's own settings file, every other key kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopwarden.sessions.claude_handover import answer_first_run
from loopwarden.sessions.claude_live import ClaudeCodeAdapter


def test_the_answers_are_merged_and_the_users_keys_kept(tmp_path: Path) -> None:
    settings = tmp_path / ".claude.json"
    settings.write_text(json.dumps({"theme": "dark", "projects": {"/other": {"allowedTools": ["Bash"]}},
                                    "customApiKeyResponses": {"approved": [], "rejected": ["0123456789abcdefWXYZ"]}}))
    settings.chmod(0o640)
    env = {"HOME": str(tmp_path), "ANTHROPIC_API_KEY": "sk-secret-0123456789abcdefWXYZ"}
    handover = ClaudeCodeAdapter.handover(["/bin/claude", "-p", "go"], "c-1", "/work", env)
    assert (handover.argv, handover.env) == (["/bin/claude", "--resume", "c-1"], {})
    merged = json.loads(settings.read_text())
    assert merged["theme"] == "dark" and merged["projects"]["/other"] == {"allowedTools": ["Bash"]}
    assert merged["hasCompletedOnboarding"] is True and merged["projects"]["/work"]["hasTrustDialogAccepted"]
    assert merged["customApiKeyResponses"] == {"approved": ["0123456789abcdefWXYZ"], "rejected": []}
    assert "sk-secret" not in settings.read_text() and settings.stat().st_mode & 0o777 == 0o640
    answer_first_run(env, "/work")  # again: nothing changes
    assert json.loads(settings.read_text()) == merged


def test_a_settings_file_that_is_not_json_is_a_one_line_error_and_untouched(tmp_path: Path) -> None:
    settings = tmp_path / ".claude.json"
    settings.write_text("{ not json")
    with pytest.raises(ValueError, match="is not valid JSON") as info:
        answer_first_run({"HOME": str(tmp_path)}, "/work")
    assert "\n" not in str(info.value) and settings.read_text() == "{ not json"
