"""The real ACP agents from npm, installed once into the project's git-ignored `.agents/` folder.

`python -m tests.agents.npm_agents` installs them by hand; tests get them through the session-scoped
`npm_agents` fixture (tests/conftest.py), which skips only where npm is missing. An install already at
the pinned versions is kept (nothing is downloaded); concurrent installs wait on a lock file.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from pathlib import Path

from loopwarden.sessions.acp_agents import PROJECT_AGENTS

PACKAGES = {"@google/gemini-cli": "0.61.0", "@zed-industries/claude-agent-acp": "0.23.1"}
INSTALL_TIMEOUT = 900.0


class NpmMissing(RuntimeError):
    """npm is not on PATH: tests that need the real agents are skipped."""


def installed_version(package: str, root: Path = PROJECT_AGENTS) -> str | None:
    """The version of `package` in root/node_modules, or None."""
    try:
        data = json.loads((root / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) else None


def missing(root: Path = PROJECT_AGENTS) -> dict[str, str]:
    """The pinned packages not installed at their version."""
    return {p: v for p, v in PACKAGES.items() if installed_version(p, root) != v}


def install(root: Path = PROJECT_AGENTS) -> Path:
    """Install the pinned agents into `root` unless they already are; returns root. Raises NpmMissing
    without npm, RuntimeError (with npm's last words) when the install fails."""
    if not missing(root):
        return root
    npm = shutil.which("npm")
    if npm is None:
        raise NpmMissing("npm is not on PATH: install Node.js 20+ to run the tests of the real ACP agents")
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test session may be installing
        todo = missing(root)
        if not todo:
            return root
        specs = [f"{p}@{v}" for p, v in todo.items()]
        done = subprocess.run([npm, "install", "--prefix", str(root), "--no-audit", "--no-fund", "--loglevel=error",
                               *specs], capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
        if done.returncode != 0 or missing(root):
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"npm install {' '.join(specs)} failed ({done.returncode}): {' / '.join(tail)}")
    return root


def _bin(name: str, root: Path = PROJECT_AGENTS) -> str | None:
    path = root / "node_modules" / ".bin" / name
    return str(path) if path.exists() else None


def gemini_bin(root: Path = PROJECT_AGENTS) -> str | None:
    """`gemini` (@google/gemini-cli) from the project's npm folder, or None before install()."""
    return _bin("gemini", root)


def claude_acp_bin(root: Path = PROJECT_AGENTS) -> str | None:
    """`claude-agent-acp` (@zed-industries/claude-agent-acp) from the project's npm folder, or None."""
    return _bin("claude-agent-acp", root)


if __name__ == "__main__":
    try:
        print(install())
    except (NpmMissing, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"npm_agents: {exc}", file=sys.stderr)
        sys.exit(1)
