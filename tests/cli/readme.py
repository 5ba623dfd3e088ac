"""The README's shell examples, read from README.md, and what runs them as a user would: bash, in a profile of
their own, and a real terminal (tmux) for the commands that open the console.

A story (tests/cli/test_readme.py) runs its commands through `Readme.run`, which refuses a command the README
no longer shows; `unsupported` names every shown command no story runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.paths import PY, ROOT
from tests.support.waiting import wait_for

BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)


@dataclass
class Shown:
    """One command of a ```sh block, and the `#` lines under it: the output the README shows for it."""

    command: str
    output: list[str] = field(default_factory=list)


def without_comment(line: str) -> str:
    """`line` up to a ` #` comment outside quotes."""
    quote = ""
    for at, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or line[at - 1].isspace()):
            return line[:at].rstrip()
    return line.rstrip()


def shown_commands(readme: Path = ROOT / "README.md") -> dict[str, Shown]:
    """Every command of README.md's ```sh blocks, by its text (without its comment), in the README's order."""
    shown: dict[str, Shown] = {}
    for block in BLOCK.findall(readme.read_text()):
        last: Shown | None = None
        for line in block.splitlines():
            if line.lstrip().startswith("#"):
                if last is not None:
                    last.output.append(line.lstrip()[1:])
            elif line.strip():
                command = without_comment(line)
                last = shown.setdefault(command, Shown(command))
    return shown


def placed(command: str, names: dict[str, str]) -> str:
    """`command` with the README's placeholders (s3, s3:g1, box2) replaced by the names a story made."""
    for name in sorted(names, key=len, reverse=True):
        command = re.sub(rf"(?<![\w:@]){re.escape(name)}(?![\w:])", names[name], command)
    return command


class Readme:
    """The commands of one story, each run as written (placeholders replaced) in bash with `env`, in `cwd`."""

    def __init__(self, story: list[str], env: dict[str, str], cwd: Path) -> None:
        shown = shown_commands()
        gone = [c for c in story if c not in shown]
        assert not gone, f"README.md no longer shows {gone}: update its story in tests/cli/test_readme.py"
        self.shown = shown
        self.story = story
        self.env = env
        self.cwd = cwd
        self.ran: list[str] = []

    def line(self, command: str, names: dict[str, str] | None = None) -> str:
        assert command in self.story, f"{command!r} is not in this story's list"
        self.ran.append(command)
        return placed(command, names or {})

    def run(self, command: str, names: dict[str, str] | None = None, *, stdin: str | None = None,
            timeout: float = 120, code: int = 0, first: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run it to its end (after the command `first`, in the same shell); it must exit with `code`."""
        line = self.line(command, names)
        if first is not None:
            line = f"{self.line(first)}\n{line}"
        proc = subprocess.run(["bash", "-c", line], env=self.env, cwd=self.cwd, input=stdin,
                              capture_output=True, text=True, timeout=timeout, check=False)
        assert proc.returncode == code, f"{line}\nexit {proc.returncode}, not {code}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def start(self, command: str, names: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """Start it in the background (a command that runs until something else happens)."""
        return subprocess.Popen(["bash", "-c", "exec " + self.line(command, names)], env=self.env, cwd=self.cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def output(self, command: str) -> list[str]:
        return self.shown[command].output

    def check_all_ran(self) -> None:
        missed = [c for c in self.story if c not in self.ran]
        assert not missed, f"the story did not run {missed}"


class Terminal:
    """A tmux server of its own: one window of 160x48 running a command as a user types it, then `[exit N]`."""

    def __init__(self, folder: Path) -> None:
        self.socket = str(folder / "tmux.sock")
        self.folder = folder

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, check=False,
                              timeout=20).stdout

    def open(self, line: str, env: dict[str, str], cwd: Path) -> None:
        """Type `line` in a new terminal (the one before, if any, closed)."""
        self.close()
        # the terminal's own size, not one the caller's environment names (Rich and Textual take COLUMNS first)
        env = {**{k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}, "TERM": "xterm-256color"}
        launcher = self.folder / "typed.sh"
        typed = shlex.quote(line + '; echo "[exit $?]"; sleep 600')
        launcher.write_text(f"cd {shlex.quote(str(cwd))}\nexec env -i "
                            + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()) + f" bash -c {typed}\n")
        self.tmux("new-session", "-d", "-s", "t", "-x", "160", "-y", "48", f"sh {shlex.quote(str(launcher))}")

    def screen(self) -> str:
        """What the terminal shows, a line wrapped at its edge joined again (paths make long lines)."""
        return self.tmux("capture-pane", "-p", "-J", "-t", "t")

    def shows(self, *texts: str, timeout: float = 60) -> str:
        def showing() -> str | None:
            screen = self.screen()
            return screen if all(text in screen for text in texts) else None
        return wait_for(showing, timeout, lambda: f"the terminal to show {texts}; it shows:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def close(self) -> None:
        self.tmux("kill-server")


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's shell after `. .venv/bin/activate`: this venv's `loopwarden` first on PATH, HOME and the XDG
    folders (where the demo, hooks and worktrees live) private to the story, none of the caller's LOOPWARDEN_*."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("LOOPWARDEN_", "XDG_")) and k != "CLAUDECODE"}
    xdg = {f"XDG_{kind}_HOME": str(home / f".{kind.lower()}") for kind in ("DATA", "CONFIG", "CACHE", "STATE")}
    return {**kept, **xdg, "HOME": str(home), "PATH": os.pathsep.join([os.path.dirname(PY), kept.get("PATH", "")]),
            **extra}
