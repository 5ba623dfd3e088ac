"""Gemini CLI's private layer: a policy file loopwarden owns that makes Gemini ask before every tool call.

Gemini allows "known safe" shell commands (echo, ls, cat, grep, ...) and read-only tools without
asking, so a supervisor over ACP would never see them. Gemini 0.61.0 reads extra policy files
given with `--admin-policy FILE`; rules there sit in the admin tier (5.x), above the user's own
rules and "allow for this session" answers (4.x) and the YOLO default (1.999). A shell rule with
an `argsPattern` also skips Gemini's safe-command heuristic, which turns ask into allow for
`echo hi`. The file lives in loopwarden's data directory: the user's ~/.gemini (login, API key,
settings, own policies) is neither read for this nor written.

When the machine has system policies (/etc/gemini-cli/policies/*.toml), Gemini ignores
`--admin-policy`; the file is then given with `--policy`, beside the user's own policies
directory (which `--policy` would otherwise replace), in the user tier at priority 999.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from loopwarden.runtime.paths import default_paths, private_dir

POLICY_NAME = "loopwarden-ask-every-call.toml"
SYSTEM_POLICIES = Path("/etc/gemini-cli/policies")

POLICY = """\
# Written by loopwarden for the Gemini CLI sessions it supervises: ask before every tool call,
# so that each call reaches loopwarden as an ACP permission request. Do not edit: rewritten at
# every launch.

# Shell commands: the argsPattern keeps Gemini's "known safe command" heuristic from turning
# this ask into an allow (echo, ls, cat, grep ...).
[[rule]]
toolName = "run_shell_command"
argsPattern = '"command":'
decision = "ask_user"
priority = 999

# Every other tool, read-only ones included.
[[rule]]
toolName = "*"
decision = "ask_user"
priority = 998
"""


def write_policy(data_dir: Path) -> Path:
    """Write the policy file under `data_dir/gemini/` (a 0700 directory) and return its path."""
    folder = private_dir(data_dir / "gemini")
    path = folder / POLICY_NAME
    if not path.exists() or path.read_text() != POLICY:
        tmp = folder / f".{POLICY_NAME}.{os.getpid()}"
        tmp.write_text(POLICY)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return path


def system_policies_present(folder: Path = SYSTEM_POLICIES) -> bool:
    """Whether the machine has Gemini system policies, which make Gemini ignore `--admin-policy`."""
    try:
        return any(name.endswith(".toml") for name in os.listdir(folder))
    except OSError:
        return False


def _settings_paths(env: Mapping[str, str]) -> list[Path]:
    system = env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or "/etc/gemini-cli/settings.json"
    home = env.get("HOME") or os.path.expanduser("~")
    return [Path(system), Path(home) / ".gemini" / "settings.json"]


def configured_admin_paths(env: Mapping[str, str]) -> list[str]:
    """The `adminPolicyPaths` of the system and user settings, which `--admin-policy` would replace."""
    out: list[str] = []
    for path in _settings_paths(env):
        try:
            settings = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # missing, or JSON with comments: nothing we can add back
        paths = settings.get("adminPolicyPaths") if isinstance(settings, dict) else None
        if isinstance(paths, list):
            out += [str(p) for p in paths if isinstance(p, str) and p not in out]
    return out


def gemini_args(policy: Path, env: Mapping[str, str], *, system_policies: bool | None = None) -> list[str]:
    """The Gemini options that load `policy` on top of what the user already has."""
    if system_policies is None:
        system_policies = system_policies_present()
    if system_policies:
        home = env.get("HOME") or os.path.expanduser("~")
        return ["--policy", str(Path(home) / ".gemini" / "policies"), "--policy", str(policy)]
    args: list[str] = []
    for path in [*configured_admin_paths(env), str(policy)]:
        args += ["--admin-policy", path]
    return args


def layer_args(env: Mapping[str, str]) -> list[str]:
    """The Gemini options of the private layer for one launch, the policy file written first under the data
    directory of loopwarden's profile in `env` (LOOPWARDEN_HOME, else the user's). Raises ValueError (one
    line) when that directory cannot be written safely."""
    data = default_paths(dict(env)).data
    try:
        policy = write_policy(data)
    except OSError as exc:
        raise ValueError(f"cannot write Gemini's policy file under {data / 'gemini'}: {exc}") from None
    return gemini_args(policy, env)
