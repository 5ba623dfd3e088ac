"""Claude Code's interactive program on a conversation a launched session had (`loopwarden takeover`).

`claude --resume ID` in the session's working directory. On a HOME that only ever ran `claude -p`, the
interactive program first asks three things (Claude Code 2.1.330): it checks that it can reach Anthropic's
servers (and exits when it cannot, as on a fake or private endpoint) until onboarding is marked done, it asks
whether the folder is trusted, and whether to use an API key found in the environment (default: no). The
answers are the keys below, merged into `$HOME/.claude.json` with every other key kept.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

KEY_SUFFIX = 20  # Claude Code remembers an approved API key by its last 20 characters


def settings_file(env: Mapping[str, str]) -> Path:
    """Claude Code's own settings: CLAUDE_CONFIG_DIR/.claude.json when set, else $HOME/.claude.json."""
    folder = env.get("CLAUDE_CONFIG_DIR") or env.get("HOME") or os.path.expanduser("~")
    return Path(folder) / ".claude.json"


def answered(settings: dict[str, Any], cwd: str, api_key: str | None) -> dict[str, Any]:
    """`settings` with the first-run questions for `cwd` (and `api_key`, when one is in the environment) answered."""
    out = dict(settings)
    out["hasCompletedOnboarding"] = True
    projects = dict(out.get("projects") or {})
    projects[cwd] = {**(projects.get(cwd) or {}), "hasTrustDialogAccepted": True}
    out["projects"] = projects
    if api_key:
        responses = dict(out.get("customApiKeyResponses") or {})
        approved = [k for k in responses.get("approved") or [] if isinstance(k, str)]
        suffix = api_key[-KEY_SUFFIX:]
        responses["approved"] = approved + ([suffix] if suffix not in approved else [])
        responses["rejected"] = [k for k in responses.get("rejected") or [] if k != suffix]
        out["customApiKeyResponses"] = responses
    return out


def answer_first_run(env: Mapping[str, str], cwd: str) -> None:
    """Merge the answers into Claude Code's settings file (written whole by a rename, mode kept). Raises
    ValueError (one line) when the file cannot be read as JSON or written."""
    path = settings_file(env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = "{}"
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        settings = json.loads(text)
    except ValueError:
        raise ValueError(f"{path} is not valid JSON; fix it, then take the session over again") from None
    if not isinstance(settings, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    merged = answered(settings, cwd, env.get("ANTHROPIC_API_KEY"))
    if merged == settings:
        return
    tmp = path.with_name(f".{path.name}.loopwarden.{os.getpid()}")
    try:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
        tmp.write_text(json.dumps(merged, indent=2), encoding="utf-8")
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"cannot write {path}: {exc.strerror or exc}") from None
