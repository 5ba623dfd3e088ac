"""The command group loads a command's module only when that command runs, and still shows every command."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import click

from loopwarden.cli import COMMANDS, load_command, main

MODULES = sorted({module for module, _ in COMMANDS.values()} | {"codex_hook", "common"})


def _eager() -> click.Group:
    """The group as it was before commands loaded lazily: every command added up front."""
    return click.Group(main.name, commands=[load_command(name) for name in COMMANDS],
                       context_settings=main.context_settings)


def test_every_command_loads_under_its_own_name() -> None:
    assert {name: load_command(name).name for name in COMMANDS} == {name: name for name in COMMANDS}


def test_every_command_defined_in_the_command_modules_is_in_the_table() -> None:
    """A command added to a module but not to COMMANDS would silently vanish from the command line."""
    defined, subcommands = set(), set()
    for name in MODULES:
        for value in vars(importlib.import_module(f"loopwarden.cli.{name}")).values():
            if isinstance(value, click.Group):
                subcommands |= {id(sub) for sub in value.commands.values()}
            if isinstance(value, click.Command):
                defined.add(id(value))
    assert defined - subcommands == {id(load_command(name)) for name in COMMANDS}


def test_help_lists_every_command_with_its_short_help_as_the_eager_group_does() -> None:
    def commands_section(group: click.Group) -> str:
        ctx = click.Context(group, max_content_width=100)
        formatter = ctx.make_formatter()
        group.format_commands(ctx, formatter)
        return formatter.getvalue()

    listed = commands_section(main)
    assert listed == commands_section(_eager())
    for name in COMMANDS:
        command = load_command(name)
        if not command.hidden:
            assert f"  {name} " in listed and command.get_short_help_str(limit=40)[:20] in listed


def _modules_after(tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    """Run `loopwarden ARGS` in a fresh interpreter (no daemon in its profile); its output and the modules
    it imported."""
    code = ("import sys\nfrom loopwarden.cli import main\n"
            f"try:\n    main.main({list(args)!r}, standalone_mode=False)\nexcept BaseException as exc:\n"
            "    print(type(exc).__name__)\n"
            "print('MODULES', *sorted(sys.modules), file=sys.stderr)")
    env = {**os.environ, "LOOPWARDEN_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=True)
    return proc.stdout, set(proc.stderr.split("MODULES", 1)[1].split())


# what `ls` (and the other commands that only talk to the daemon) has no use for
NOT_FOR_LS = {"loopwarden.cli.web", "loopwarden.cli.demo", "loopwarden.cli.adapters", "loopwarden.cli.offline",
              "loopwarden.cli.hook", "loopwarden.cli.run", "loopwarden.replay", "loopwarden.sessions.registry",
              "loopwarden.supervisor.health", "loopwarden.supervisor.config", "psutil"}


def test_a_command_imports_only_its_own_module(tmp_path: Path) -> None:
    """`loopwarden ls` does not import the web server, the demo, the replay engine, the adapters or the engine."""
    out, loaded = _modules_after(tmp_path, "ls", "--help")
    assert "Usage: " in out and " ls " in out
    assert "loopwarden.cli.live" in loaded
    assert not loaded & NOT_FOR_LS


def test_ls_without_a_daemon_imports_none_of_the_rest(tmp_path: Path) -> None:
    out, loaded = _modules_after(tmp_path, "ls")
    assert out.strip() == "DaemonFail"  # read-only commands start no daemon
    assert not loaded & NOT_FOR_LS


def test_run_loads_the_adapter_registry_for_its_choices(tmp_path: Path) -> None:
    out, loaded = _modules_after(tmp_path, "run", "--help")
    assert "--adapter [" in out and "loopwarden.sessions.registry" in loaded


def test_a_mistyped_command_is_answered_with_the_nearest_commands_though_none_is_loaded(tmp_path: Path) -> None:
    out, _ = _modules_after(tmp_path, "lgs")
    assert out.strip() == "NoSuchCommand"
    proc = subprocess.run([sys.executable, "-m", "loopwarden", "lgs"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LOOPWARDEN_HOME": str(tmp_path)})
    assert proc.returncode != 0 and "No such command 'lgs'" in proc.stderr and "'logs'" in proc.stderr
