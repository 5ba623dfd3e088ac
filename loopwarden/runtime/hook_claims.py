"""Which process a hook event binds its attached session to: the agent's own program, never a person's.

A hook request comes from a short-lived `loopwarden hook` process that the agent (Claude Code, Codex) runs
through a shell. The session then claims the agent process and everything below it (principal.py), so an
agent's tools are refused operator actions. Any process can send hook events, and an environment variable
such as CLAUDE_PID is the sender's word, so the claim is found from /proc alone: the nearest ancestor of
the hook process whose program is the agent's (its executable, its command name, or the script an
interpreter runs). The walk passes shells that run a command and any other program, and gives up at anything that
stands for a person: an interactive shell, a terminal multiplexer, sshd, a terminal emulator, init, the
daemon's own ancestors, or a process running loopwarden itself (its console or CLI). So a forged event
can claim only an agent program above its sender, never the place where a person types.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path

from .procfs import ProcId, ProcInfo, command_line

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "tcsh", "csh", "ash", "yash", "busybox",
                    "nu", "elvish", "xonsh", "pwsh"})
# Programs that stand for a person (where one types, or what holds the terminal they type in): never an
# agent, and a hook's walk never passes them.
PERSON_PROGRAMS = frozenset({
    "tmux", "tmux: server", "screen", "SCREEN", "zellij", "abduco", "dtach", "byobu",  # multiplexers
    "sshd", "ssh", "mosh-server", "login", "su", "sudo", "doas", "agetty", "getty",  # logins
    "init", "systemd", "launchd", "runit", "s6-svscan", "tini", "dumb-init",  # init
    "xterm", "uxterm", "gnome-terminal", "gnome-terminal-server", "konsole", "alacritty", "kitty",
    "wezterm", "wezterm-gui", "wezterm-mux-server", "foot", "footclient", "urxvt", "rxvt", "st", "terminator",
    "tilix", "xfce4-terminal", "mate-terminal", "lxterminal", "qterminal", "terminology", "guake", "tilda",
    "yakuake", "sakura", "ghostty", "contour", "rio", "warp", "cool-retro-term", "eterm", "kgx", "ptyxis",
    "code", "code-insiders", "cursor", "windsurf", "zed", "zeditor", "emacs", "vim", "nvim",  # editors' terminals
})
INTERPRETERS = ("python", "node", "nodejs", "bun", "deno")
_SHELL_VALUE_OPTIONS = frozenset({"--rcfile", "--init-file"})


def hook_agent(chain: Sequence[ProcInfo], stop: Collection[int], programs: Collection[str]) -> ProcId | None:
    """The agent process that ran a hook (chain[0] is the hook process, its ancestors follow), or None.

    The nearest ancestor running one of `programs` (e.g. "claude"); the walk gives up at a person's
    process (PERSON_PROGRAMS, an interactive shell, loopwarden itself), at init and at `stop` (the daemon and its
    ancestors), so none of those is ever claimed, whatever the event or its environment says.
    """
    for stat in chain[1:]:
        if stat.pid <= 1 or stat.pid in stop:
            return None
        argv = command_line(stat.pid)
        names = program_names(stat, argv)
        if names & PERSON_PROGRAMS or is_loopwarden(stat, argv):
            return None
        if is_shell(names):
            if not runs_command(argv):
                return None  # a person's shell: the hook was run by hand there
            continue
        if any(runs_program(name, program) for name in names for program in programs):
            return stat.id
    return None


def program_names(stat: ProcInfo, argv: Sequence[str]) -> set[str]:
    """Every name a process goes by: its executable's, its command name, its argv[0], and for an
    interpreter the script it runs (its file name without suffix, and its package folder's name)."""
    names = {stat.comm}
    exe = executable(stat.pid)
    if exe:
        names.add(Path(exe).name)
    if argv:
        names.add(Path(argv[0].lstrip("-")).name)
    if any(name.startswith(INTERPRETERS) for name in names) and len(argv) > 1:
        script = next((arg for arg in argv[1:] if not arg.startswith("-")), "")
        if script:
            path = Path(script)
            names.update({path.name, path.stem, path.parent.name})
    names.discard("")
    return names


def runs_program(name: str, program: str) -> bool:
    """Whether a process name is the program's: itself, or a build of it (`codex-x86_64-unknown-linux-musl`,
    `claude-code`, `claude.exe`)."""
    return name == program or name.startswith((f"{program}-", f"{program}."))


def executable(pid: int) -> str | None:
    """The file a process runs (its kernel link, which the process cannot rename), or None."""
    try:
        return os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return None


def is_shell(names: Collection[str]) -> bool:
    return any(name in SHELLS for name in names)


def runs_command(argv: Sequence[str]) -> bool:
    """Whether a shell runs a command (-c) or a script, rather than reading what a person types."""
    if not argv or argv[0].startswith("-"):  # a login shell
        return False
    args = iter(argv[1:])
    for arg in args:
        if arg in _SHELL_VALUE_OPTIONS:
            next(args, None)
        elif arg.startswith("--"):
            continue
        elif arg[:1] in ("-", "+") and len(arg) > 1:
            flags = arg[1:]
            if arg[0] == "-" and ("i" in flags or "s" in flags):
                return False
            if "c" in flags:
                return True
            if "o" in flags or "O" in flags:
                next(args, None)
        else:
            return True  # a script file
    return False


def is_loopwarden(stat: ProcInfo, argv: Sequence[str]) -> bool:
    """Whether a process runs loopwarden (its console, CLI, web server or daemon)."""
    return stat.comm == "loopwarden" or any(Path(a).name == "loopwarden" or a.startswith("loopwarden.")
                                            for a in argv[:3])
