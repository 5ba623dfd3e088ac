"""A private, offline HOME for the Gemini CLI in tests (shared research `acp_agents.md`, "Launching offline").

Its settings switch off usage statistics, telemetry, auto-update and folder trust, and allow one
attempt per model request, so an HTTP 500 ends a turn at once instead of being retried with
backoff for minutes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1},
    "security": {"folderTrust": {"enabled": False}, "auth": {"selectedType": "gemini-api-key"}},
}


def write_gemini_home(home: Path, **settings: object) -> Path:
    """Create `home` with `.gemini/settings.json` (SETTINGS, top-level keys replaced by `settings`)."""
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({**SETTINGS, **settings}, indent=2))
    return home


def gemini_env(home: Path, base_url: str, **extra: str) -> dict[str, str]:
    """The whole environment of an offline Gemini: PATH, the private HOME, a dummy key, the fake's URL
    (GEMINI_CLI_NO_RELAUNCH is loopwarden's to add, or the caller's)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "GEMINI_API_KEY": "dummy",
            "GOOGLE_GEMINI_BASE_URL": base_url, **extra}
