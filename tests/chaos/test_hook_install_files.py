"""`loopwarden hook install` / `uninstall` over the user's real dotfiles (issue 29, item 4).

The real CLI, as a user runs it, over files a user may have: symlinked (a chain of links, a linked
directory), CRLF, tabs, unicode, numbers Python would write in another form, no final newline,
comments, other people's hooks. Each edit goes through the links into the file they name, keeps
every byte outside the change, leaves a new backup beside that file, and a file it cannot read is
refused in one line with nothing written.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.codex.codex_home import codex_bin  # noqa: F401
from tests.codex_hook.helpers import hooks_list
from tests.support.paths import PY

pytestmark = pytest.mark.timeout(120)

BACKUP = re.compile(r"\.loopwarden-\d{8}T\d{6}Z(-\d+)?\.bak$")


def lw_hook(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`loopwarden hook ARGS` with HOME, CODEX_HOME and the working directory in `tmp`."""
    env = {**os.environ, "HOME": str(tmp / "home"), "CODEX_HOME": str(tmp / "home" / ".codex")}
    (tmp / "home" / ".codex").mkdir(parents=True, exist_ok=True)
    (tmp / "work").mkdir(exist_ok=True)
    return subprocess.run([PY, "-m", "loopwarden", "hook", *args], cwd=tmp / "work", env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def backups(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if BACKUP.search(p.name))


def files(directory: Path) -> dict[str, bytes | str]:
    """Every entry under `directory`: a link as its target's name, a file as its bytes."""
    out: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        key = str(path.relative_to(directory))
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_file():
            out[key] = path.read_bytes()
    return out


def no_constants(text: str) -> Any:
    """json.loads that refuses NaN and Infinity, as any other JSON reader does."""
    def refuse(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")
    return json.loads(text, parse_constant=refuse)


def our_commands(settings: dict[str, Any], agent: str) -> list[str]:
    return [h["command"] for groups in settings.get("hooks", {}).values() for g in groups
            for h in g.get("hooks", []) if h["command"].endswith(f"hook {agent}")]


# ---- symlinks -------------------------------------------------------------------------------

def test_a_symlinked_settings_json_stays_a_link_and_the_file_it_names_is_edited(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    (dotfiles / "claude").mkdir(parents=True)
    real = dotfiles / "claude" / "settings.json"
    original = b'{\n  "model": "opus"\n}\n'
    real.write_bytes(original)
    real.chmod(0o640)
    (dotfiles / "claude" / "current.json").symlink_to("settings.json")  # a chain of two links
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude").symlink_to(dotfiles / "claude")  # a linked directory too
    (dotfiles / "claude" / "user.json").symlink_to("current.json")
    link = home / ".claude" / "user.json"

    out = ok(lw_hook(tmp_path, "install", "--file", str(link)))
    assert os.readlink(link) == "current.json" and os.readlink(dotfiles / "claude" / "current.json") == "settings.json"
    assert not real.is_symlink() and stat.S_IMODE(real.stat().st_mode) == 0o640
    settings = no_constants(real.read_text())
    assert settings["model"] == "opus" and len(our_commands(settings, "claude-code")) == 7
    [backup] = backups(dotfiles / "claude")
    assert backup.read_bytes() == original and str(backup) in out
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert sorted(p.name for p in (dotfiles / "claude").iterdir()) == sorted(
        ["settings.json", "current.json", "user.json", backup.name])  # no temporary file left

    ok(lw_hook(tmp_path, "uninstall", "--file", str(link)))
    assert real.read_bytes() == original and os.readlink(link) == "current.json"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_symlinked_codex_files_stay_links_and_crlf_stays_crlf(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    config = dotfiles / "codex-config.toml"
    original = (b'# my Codex\r\nmodel = "gpt-5.5"  # theirs\r\n\r\n[projects."/srv/app"]\r\n'
                b'trust_level = "trusted"\r\n')
    config.write_bytes(original)
    config.chmod(0o600)
    hooks = dotfiles / "codex-hooks.json"
    hooks_original = (b'{\r\n  "hooks": {\r\n    "Stop": [{"hooks": [{"type": "command", "command": "/opt/a"}]}]\r\n'
                      b'  }\r\n}\r\n')
    hooks.write_bytes(hooks_original)
    codex = tmp_path / "home" / ".codex"
    codex.mkdir(parents=True)
    (codex / "config.toml").symlink_to(config)
    (codex / "hooks.json").symlink_to("../../dotfiles/codex-hooks.json")

    out = ok(lw_hook(tmp_path, "install", "--agent", "codex"))
    assert (codex / "config.toml").is_symlink() and (codex / "hooks.json").is_symlink()
    assert os.readlink(codex / "config.toml") == str(config)
    text = config.read_bytes()
    assert text.startswith(original) and text.count(b"\n") == text.count(b"\r\n") > original.count(b"\n")
    state = tomllib.loads(text.decode())["hooks"]["state"]
    assert list(state) == [f"{codex}/hooks.json:pre_tool_use:0:0"]
    raw = hooks.read_bytes()
    assert raw.count(b"\n") == raw.count(b"\r\n") and len(our_commands(no_constants(raw.decode()), "codex")) == 1
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert len(backups(dotfiles)) == 2 and all(str(b) in out for b in backups(dotfiles))

    ok(lw_hook(tmp_path, "uninstall", "--agent", "codex"))
    assert config.read_bytes() == original and hooks.read_bytes() == hooks_original
    assert (codex / "config.toml").is_symlink() and (codex / "hooks.json").is_symlink()


def test_the_real_codex_trusts_the_hook_through_a_symlinked_crlf_config(codex_bin: str, tmp_path: Path) -> None:  # noqa: F811
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "config.toml").write_bytes(b'# mine\r\napproval_policy = "on-request"\r\n')
    (dotfiles / "hooks.json").write_bytes(b'{\r\n\t"hooks": {\r\n\t\t"Stop": [{"hooks": [{"type": "command", '
                                          b'"command": "/opt/a"}]}]\r\n\t}\r\n}\r\n')
    codex = tmp_path / "home" / ".codex"
    codex.mkdir(parents=True)
    for name in ("config.toml", "hooks.json"):
        (codex / name).symlink_to(dotfiles / name)
    before = {h["key"]: h["trustStatus"] for h in hooks_list(codex_bin, codex, tmp_path)}
    ok(lw_hook(tmp_path, "install", "--agent", "codex"))
    assert (codex / "config.toml").is_symlink() and (codex / "hooks.json").is_symlink()
    config = (dotfiles / "config.toml").read_bytes()
    assert config.count(b"\n") == config.count(b"\r\n")  # what Codex reads below is the CRLF file
    listed = hooks_list(codex_bin, codex, tmp_path)
    [mine] = [h for h in listed if h["command"].endswith("hook codex")]
    assert mine["trustStatus"] == "trusted", mine
    assert {h["key"]: h["trustStatus"] for h in listed if h is not mine} == before
    ok(lw_hook(tmp_path, "uninstall", "--agent", "codex"))
    assert {h["key"]: h["trustStatus"] for h in hooks_list(codex_bin, codex, tmp_path)} == before


def test_a_dangling_link_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    link = home / ".claude" / "settings.json"
    link.symlink_to(tmp_path / "dotfiles" / "gone.json")
    for action in ("install", "uninstall"):
        done = lw_hook(tmp_path, action, "--user")
        assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("loopwarden: error: ") and str(link) in done.stderr
        assert link.is_symlink() and not (tmp_path / "dotfiles").exists()
        assert os.listdir(home / ".claude") == ["settings.json"]


# ---- bytes outside the change -----------------------------------------------------------------

ODD_NUMBERS = ['1.0e400', '1E5', '-0.0', '10.50', '1e-7', '123456789012345678901234567890', '0.1000', '-1E+2']


def test_numbers_are_kept_exactly_as_written(tmp_path: Path) -> None:
    path = tmp_path / "work" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    original = ('{\n  "limits": {' + ", ".join(f'"n{i}": {n}' for i, n in enumerate(ODD_NUMBERS))
                + '},\n  "list": [' + ", ".join(ODD_NUMBERS) + ']\n}\n')
    path.write_text(original)

    ok(lw_hook(tmp_path, "install"))
    text = path.read_text()
    assert text.startswith(original.rstrip("}\n")), text
    settings = no_constants(text)  # still JSON: no Infinity, no NaN
    assert len(our_commands(settings, "claude-code")) == 7
    for number in ODD_NUMBERS:
        assert text.count(number) == original.count(number), number

    ok(lw_hook(tmp_path, "uninstall"))
    assert path.read_text() == original


THEIRS = '{"type": "command", "command": "python3 /opt/audit.py", "timeout": 5}'
SETTINGS_FILES = {
    "crlf, tabs, unicode, no final newline": (
        '{\r\n\t"model": "opus",\r\n\t"title": "caf\u00e9 \u2615 \\u00e9 \\"q\\"",\r\n\t"hooks": {\r\n'
        '\t\t"PreToolUse": [\r\n\t\t\t{\r\n\t\t\t\t"matcher": "Bash",\r\n\t\t\t\t"hooks": [' + THEIRS + ']\r\n'
        '\t\t\t}\r\n\t\t],\r\n\t\t"Notification": []\r\n\t}\r\n}'),
    "minified": '{"hooks":{"Stop":[{"hooks":[' + THEIRS.replace(": ", ":").replace(", ", ",") + ']}]},"n":1E5}',
    "empty object": "{}\n",
    "empty object, no newline": "{}",
    "four spaces, empty containers, odd numbers": ('{\n    "big": 1.0e400,\n    "neg": -0.0,\n    "arr": [],\n'
                                                   '    "env": {},\n    "x": [\n    ]\n}\n'),
    "odd spacing": '  { "a" : 1 ,  "hooks" : { "Stop" : [ ' + THEIRS + ' ] ,"SessionEnd":[' + THEIRS + '] } }  \n\n',
    "byte order mark": '\ufeff{\n  "model": "opus"\n}\n',
    "an empty hooks map": '{\r\n  "model": "opus",\r\n  "days": 1.0e400,\r\n  "hooks": {}\r\n}\r\n',
    "an empty event list": '{\n  "hooks": {\n    "PreToolUse": []\n  }\n}\n',
}


@pytest.mark.parametrize("name", list(SETTINGS_FILES))
def test_claude_install_then_uninstall_gives_back_every_byte(tmp_path: Path, name: str) -> None:
    path = tmp_path / "work" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    original = SETTINGS_FILES[name].encode()
    path.write_bytes(original)
    ok(lw_hook(tmp_path, "install"))
    installed = path.read_bytes()
    settings = no_constants(installed.decode("utf-8-sig"))
    assert len(our_commands(settings, "claude-code")) == 7
    if b"\r\n" in original:
        assert installed.count(b"\n") == installed.count(b"\r\n")
    if b"\t" in original:
        assert b"\n  " not in installed  # indented with the file's tabs
    assert "already installed" in ok(lw_hook(tmp_path, "install"))
    assert path.read_bytes() == installed
    ok(lw_hook(tmp_path, "uninstall"))
    assert path.read_bytes() == original


CONFIGS = {
    "crlf, comments, no final newline": (b'# mine\r\nmodel = "gpt-5.5"\r\n[hooks.state."/x/hooks.json:stop:0:0"]\r\n'
                                         b'trusted_hash = "sha256:00"  # theirs'),
    "tabs, unicode, final blank line": '[profiles."\u00e9"]\n\tmodel = "o3"\t# caf\u00e9\n\n'.encode(),
    "empty": b"",
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_codex_install_then_uninstall_gives_back_every_byte(tmp_path: Path, name: str) -> None:
    codex = tmp_path / "home" / ".codex"
    codex.mkdir(parents=True)
    originals = {"config.toml": CONFIGS[name],
                 "hooks.json": b'{\r\n\t"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [' + THEIRS.encode()
                               + b']}]},\r\n\t"x": 1.50\r\n}'}
    for file, data in originals.items():
        (codex / file).write_bytes(data)
    ok(lw_hook(tmp_path, "install", "--agent", "codex"))
    config = (codex / "config.toml").read_bytes()
    assert config.startswith(originals["config.toml"])
    if b"\r\n" in originals["config.toml"]:
        assert config.count(b"\n") == config.count(b"\r\n")
    key = f"{codex}/hooks.json:pre_tool_use:1:0"
    assert tomllib.loads(config.decode())["hooks"]["state"][key]["trusted_hash"].startswith("sha256:")
    ok(lw_hook(tmp_path, "uninstall", "--agent", "codex"))
    assert {f: (codex / f).read_bytes() for f in originals} == originals


# ---- backups ------------------------------------------------------------------------------------

def test_backups_are_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "work" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    original = b'{"model": "opus"}\n'
    path.write_bytes(original)
    seen: list[bytes] = [original]
    named: list[Path] = []
    for action in ("install", "uninstall", "install", "uninstall"):  # within a second or two: counters
        out = ok(lw_hook(tmp_path, action))
        made = backups(path.parent)
        assert len(made) == len(seen)
        named += [b for b in made if str(b) in out]
        assert len(named) == len(seen) and named[-1].read_bytes() == seen[-1]
        seen.append(path.read_bytes())
    made = backups(path.parent)
    assert len({b.name for b in made}) == 4 and all(stat.S_IMODE(b.stat().st_mode) == 0o600 for b in made)
    assert sorted(b.read_bytes() for b in made) == sorted(seen[:4])
    assert named[0].read_bytes() == original
    assert path.read_bytes() == original

    codex = tmp_path / "home" / ".codex"
    codex.mkdir(parents=True, exist_ok=True)
    (codex / "config.toml").write_bytes(b'model = "o3"\n')
    for action in ("install", "uninstall", "install"):
        ok(lw_hook(tmp_path, action, "--agent", "codex"))
    assert len([b for b in backups(codex) if b.name.startswith("config.toml.")]) == 3
    assert len([b for b in backups(codex) if b.name.startswith("hooks.json.")]) == 2  # it was created by the first
    assert b'model = "o3"\n' in [b.read_bytes() for b in backups(codex)]


# ---- refusals ---------------------------------------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000  # past Python's recursion limit in json and tomllib
REFUSED = {
    "json cut short": ("claude", "settings.json", b'{"model": "opus",'),
    "hooks of the wrong shape": ("claude", "settings.json", b'{"hooks": {"Stop": {}}}'),
    "json not utf-8": ("claude", "settings.json", b'{"model": "caf\xe9"}'),
    "json not an object": ("claude", "settings.json", b"[1, 2]"),
    "json nested too deeply": ("claude", "settings.json", b'{"a": ' + DEEP + b"}"),
    "codex hooks of the wrong shape": ("codex", "hooks.json", b'{"hooks": []}'),
    "toml unterminated": ("codex", "config.toml", b'model = "unterminated\r\n'),
    "toml not utf-8": ("codex", "config.toml", b'model = "caf\xe9"\n'),
    "toml trust of the wrong shape": ("codex", "config.toml", b"[hooks]\nstate = 3\n"),
    "toml nested too deeply": ("codex", "config.toml", b"a = " + DEEP + b"\n"),
}


@pytest.mark.parametrize(("agent", "name", "data"), list(REFUSED.values()), ids=list(REFUSED))
def test_a_file_that_cannot_be_parsed_is_refused_in_one_line_and_left_alone(
        tmp_path: Path, agent: str, name: str, data: bytes) -> None:
    where = tmp_path / "work" / ".claude" if agent == "claude" else tmp_path / "home" / ".codex"
    where.mkdir(parents=True)
    (where / name).write_bytes(data)
    before = files(tmp_path)
    for action in ("install", "uninstall"):
        done = lw_hook(tmp_path, action, *(["--agent", "codex"] if agent == "codex" else []))
        assert files(tmp_path) == before
        if action == "uninstall" and name == "config.toml" and b"state" in data:
            assert done.returncode == 0, done.stderr  # valid TOML, and no trust of ours to take out
            continue
        assert done.returncode == 2 and done.stdout == "", done.stdout
        assert done.stderr.startswith("loopwarden: error: ") and done.stderr.count("\n") == 1, done.stderr
        assert str(where / name) in done.stderr and "Traceback" not in done.stderr
