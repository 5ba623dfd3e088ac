"""A private, offline CODEX_HOME for tests, and the real Codex binary from the `openai-codex-cli-bin` wheel.

The config follows shared research `codex_app_server.md` ("Offline configuration"): a mock provider
on the fake Responses API, no retries, no analytics, no plugins, and no unbounded reconnection, so a
dead model server ends a turn instead of being retried forever. A home under the system temp dir
(pytest's tmp_path) works; Codex only warns that it will not create its PATH helper aliases there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

MODEL = "gpt-5.5"  # in Codex's built-in catalogue: no metadata warning, and it offers apply_patch


def codex_binary() -> str | None:
    """The bundled Codex CLI of the `openai-codex-cli-bin` wheel (its layout kept: bin/ beside codex-resources/)."""
    try:
        import codex_cli_bin  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    path = Path(codex_cli_bin.bundled_codex_path())
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def config_toml(base_url: str, *, model: str = MODEL) -> str:
    return f"""\
model = "{model}"
model_provider = "mock"
approval_policy = "on-request"
sandbox_mode = "danger-full-access"

[model_providers.mock]
name = "mock"
base_url = "{base_url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false

[analytics]
enabled = false

[features]
plugins = false
unbounded_connection_retries = false
"""


def write_codex_home(home: Path, base_url: str, *, model: str = MODEL) -> Path:
    """Create `home` with a config.toml pointing at `base_url` (e.g. `FakeResponses.url`)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config_toml(base_url, model=model))
    return home


def codex_env(home: Path, **extra: str) -> dict[str, str]:
    """The whole environment a Codex process gets: PATH, HOME and CODEX_HOME, nothing of the caller's keys."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home), **extra}


@pytest.fixture(scope="session")
def codex_bin() -> str:
    """The real Codex CLI, checked to run; the test is skipped when the wheel is not installed."""
    path = codex_binary()
    if path is None:
        pytest.skip("the Codex CLI is not installed: pip install openai-codex-cli-bin (the `test` extra)")
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False,
                              env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"the bundled Codex CLI cannot run here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"the bundled Codex CLI cannot run here: {done.stderr.strip()[:200]}")
    return path
