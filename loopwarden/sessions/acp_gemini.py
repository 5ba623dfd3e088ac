"""Gemini CLI's private layer: a policy file loopwarden owns that makes Gemini ask before every tool call.

Gemini allows "known safe" shell commands (echo, ls, cat, grep, ...) and read-only tools without
asking, so a supervisor over ACP would never see them. Gemini 0.61.0 reads extra policy files
given with `--admin-policy FILE`; rules there sit in the admin tier (5.x), above the user's own
rules and "allow for this session" answers (4.x) and the YOLO default (1.999). A shell rule with
an `argsPattern` also skips Gemini's safe-command heuristic, which turns ask into allow for
`echo hi`. The file lives in loopwarden's data directory: nothing in the user's ~/.gemini (login,
API key, settings, own policies) is written, and its policy files are only read (below).

An admin-tier ask would also outrank the user's own `deny` rules (and Gemini's default deny of
`exit_plan_mode` outside plan mode), turning a refusal into a question loopwarden may allow. So
every `deny` rule of the user's and the project's policy files is copied into the same file at
priority 999, above the asks, and the asks leave plan mode to Gemini. The file is named after
its content, so concurrent launches with different copies never rewrite each other's file.

When the machine has system policies (/etc/gemini-cli/policies/*.toml), Gemini ignores
`--admin-policy`; the file is then given with `--policy`, beside the user's own policies
directory (which `--policy` would otherwise replace), in the user tier (4.996 to 4.999, still above
"allow for this session" at 4.95).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from loopwarden.paths import default_paths, private_dir

POLICY_PREFIX = "loopwarden-ask-every-call"
SYSTEM_POLICIES = Path("/etc/gemini-cli/policies")

HEADER = """\
# Written by loopwarden for the Gemini CLI sessions it supervises: ask before every tool call,
# so that each call reaches loopwarden as an ACP permission request. Do not edit: loopwarden
# writes a new file when the rules change.
"""

ASKS = """
# Shell commands: the argsPattern keeps Gemini's "known safe command" heuristic from turning
# this ask into an allow (echo, ls, cat, grep ...).
[[rule]]
toolName = "run_shell_command"
argsPattern = '"command":'
decision = "ask_user"
priority = 997
modes = ["default", "autoEdit", "yolo"]

# Every other tool, read-only ones included.
[[rule]]
toolName = "*"
decision = "ask_user"
priority = 996
modes = ["default", "autoEdit", "yolo"]
"""

# Gemini's own default-tier deny that the asks would outrank.
DEFAULT_DENIES: list[dict[str, object]] = [
    {"toolName": "exit_plan_mode", "decision": "deny", "modes": ["default", "autoEdit", "yolo"],
     "denyMessage": "You are not currently in Plan Mode. Use enter_plan_mode first to design a plan."},
]


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string (ASCII, standard escapes) is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise ValueError(f"cannot write {type(value).__name__} in a policy rule")


def _rule_text(rule: dict[str, object], source: str) -> str:
    body = "".join(f"{json.dumps(key)} = {_toml_value(value)}\n" for key, value in rule.items() if key != "priority")
    return f"\n# copied from {source}\n[[rule]]\n{body}priority = 999\n"


def policy_dirs(env: Mapping[str, str], cwd: str | None) -> list[Path]:
    """The policy folders whose deny rules are copied: the user's (~/.gemini/policies, or under
    GEMINI_CLI_HOME) and the project's (.gemini/policies in the working directory)."""
    dirs = [gemini_home(env) / ".gemini" / "policies"]
    if cwd:
        dirs.append(Path(cwd) / ".gemini" / "policies")
    return dirs


def deny_rules(dirs: list[Path]) -> list[tuple[dict[str, object], str]]:
    """Every `deny` rule of the TOML files in `dirs`, with the file it came from; unreadable files are skipped
    (Gemini reports them itself)."""
    out: list[tuple[dict[str, object], str]] = []
    for folder in dirs:
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".toml"))
        except OSError:
            continue
        for name in names:
            try:
                rules = tomllib.loads((folder / name).read_text()).get("rule", [])
            except (OSError, ValueError):
                continue
            for rule in rules if isinstance(rules, list) else []:
                if isinstance(rule, dict) and rule.get("decision") == "deny":
                    out.append((rule, str(folder / name)))
    return out


def policy_text(denies: list[tuple[dict[str, object], str]]) -> str:
    """The whole policy file: the copied denies first (priority 999), then the asks."""
    parts = [HEADER]
    for rule, source in [*((r, "Gemini's default policies") for r in DEFAULT_DENIES), *denies]:
        try:
            parts.append(_rule_text(rule, source))
        except ValueError:
            continue
    parts.append(ASKS)
    return "".join(parts)


def write_policy(data_dir: Path, text: str) -> Path:
    """Write `text` under `data_dir/gemini/` (a 0700 directory), named after its content, and return the path."""
    return _write_private(data_dir, POLICY_PREFIX, ".toml", text)


def _write_private(data_dir: Path, prefix: str, suffix: str, text: str) -> Path:
    folder = private_dir(data_dir / "gemini")
    path = folder / f"{prefix}-{hashlib.sha256(text.encode()).hexdigest()[:16]}{suffix}"
    if not path.exists() or path.read_text() != text:
        tmp = folder / f".{path.name}.{os.getpid()}"
        tmp.write_text(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return path


def gemini_home(env: Mapping[str, str]) -> Path:
    """The folder Gemini keeps `.gemini` in: GEMINI_CLI_HOME, else HOME."""
    return Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or os.path.expanduser("~"))


def system_policies_present(folder: Path = SYSTEM_POLICIES) -> bool:
    """Whether the machine has Gemini system policies, which make Gemini ignore `--admin-policy`."""
    try:
        return any(name.endswith(".toml") for name in os.listdir(folder))
    except OSError:
        return False


def _settings_paths(env: Mapping[str, str]) -> list[Path]:
    system = env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or "/etc/gemini-cli/settings.json"
    return [Path(system), gemini_home(env) / ".gemini" / "settings.json"]


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
        return ["--policy", str(gemini_home(env) / ".gemini" / "policies"), "--policy", str(policy)]
    args: list[str] = []
    for path in [*configured_admin_paths(env), str(policy)]:
        args += ["--admin-policy", path]
    return args


SETTINGS_ENV, DEFAULTS_ENV = "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
SETTINGS_PREFIX = "loopwarden-system-settings"


def layer_env(env: Mapping[str, str]) -> dict[str, str]:
    """For a run that loads an earlier session: Gemini's system settings (which outrank the user's) given as a
    copy with its session cleanup switched off, since by default Gemini deletes a session that `session/load`
    loaded the next time it starts. The copy keeps every other system setting, and the system defaults file
    stays where it was. Nothing when the system settings cannot be read as JSON."""
    system = Path(env.get(SETTINGS_ENV) or "/etc/gemini-cli/settings.json")
    try:
        settings = json.loads(system.read_text())
    except FileNotFoundError:
        settings = {}
    except (OSError, ValueError):
        return {}
    if not isinstance(settings, dict):
        return {}
    general = settings["general"] = dict(settings.get("general") or {})
    general["sessionRetention"] = {**(general.get("sessionRetention") or {}), "enabled": False}
    data = default_paths(dict(env)).data
    try:
        path = _write_private(data, SETTINGS_PREFIX, ".json", json.dumps(settings, indent=2, sort_keys=True))
    except OSError:
        return {}
    return {SETTINGS_ENV: str(path), DEFAULTS_ENV: env.get(DEFAULTS_ENV) or str(system.parent / "system-defaults.json")}


def layer_args(env: Mapping[str, str], cwd: str | None = None) -> list[str]:
    """The Gemini options of the private layer for one launch, the policy file written first under the data
    directory of loopwarden's profile in `env` (LOOPWARDEN_HOME, else the user's). Raises ValueError (one
    line) when that directory cannot be written safely."""
    data = default_paths(dict(env)).data
    try:
        policy = write_policy(data, policy_text(deny_rules(policy_dirs(env, cwd))))
    except OSError as exc:
        raise ValueError(f"cannot write Gemini's policy file under {data / 'gemini'}: {exc}") from None
    return gemini_args(policy, env)
