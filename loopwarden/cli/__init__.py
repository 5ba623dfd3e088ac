"""The `loopwarden` command line."""

from __future__ import annotations

import importlib
import sys

import click

from .. import compiled
from .common import EXIT_USAGE, Fail

# Each command by name: (its module in loopwarden.cli, its attribute there). A command's module is imported
# when that command runs (or --help lists them all), so `loopwarden ls` does not pay for the web server, the
# replay engine or the adapters' SDKs. tests/cli/test_lazy.py checks this against the modules themselves.
COMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("offline", "replay"), "config": ("offline", "config"), "demo": ("demo", "demo"),
    "run": ("run", "run"), "ls": ("live", "ls"), "status": ("live", "status"), "logs": ("live", "logs"),
    "gates": ("live", "gates"), "approve": ("live", "approve"), "deny": ("live", "deny"),
    "grant": ("live", "grant"), "reset": ("live", "reset"), "set": ("live", "set_limits"),
    "inject": ("live", "inject"), "pause": ("live", "pause"), "resume": ("live", "resume"),
    "kill": ("live", "kill"), "rewind": ("live", "rewind"), "restart": ("live", "restart"),
    "continue": ("continuing", "continue_session"), "takeover": ("continuing", "takeover"),
    "adopt": ("live", "adopt"), "audit": ("live", "audit"), "explain": ("explain", "explain"),
    "prune": ("live", "prune"), "console": ("live", "console"), "web": ("web", "web"), "serve": ("live", "serve"),
    "stop-daemon": ("live", "stop_daemon"), "restart-daemon": ("restart_daemon", "restart_daemon"),
    "hook": ("hook", "hook"), "adapters": ("adapters", "adapters"),
    "notify": ("notify", "notify"), "where": ("remote", "where"),
    "diff": ("worktree", "diff"), "worktree": ("worktree", "worktree"),
}


def load_command(name: str) -> click.Command:
    """The command `name` (a key of COMMANDS), its module imported now."""
    module, attr = COMMANDS[name]
    command: click.Command = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    return command


class _Commands(click.Group):
    """The command group; `loopwarden ls --host box` reads as `loopwarden --host box ls`. Commands load when
    first asked for (COMMANDS)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                               list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:  # suggest from every command, not only those loaded
            raise click.exceptions.NoSuchCommand(exc.command_name, possibilities=self.list_commands(ctx),
                                                 ctx=ctx) from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        command = self.get_command(ctx, args[0]) if args else None
        valued = {name for p in (command.params if command else []) if isinstance(p, click.Option) and not p.is_flag
                  for name in p.opts}
        return super().parse_args(ctx, host_first(args, valued))


def host_first(args: list[str], valued: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """`--host X` (or `--host=X`) given after a command that works through a host, moved before it, where the
    group's option is; up to `--`, after which words are the command's own, and never the value of one of the
    command's options (`valued`: `--note --host` is a note)."""
    if not args or not any(a == "--host" or a.startswith("--host=") for a in args[1:]):
        return args  # nothing to move: the common case, without importing the ssh machinery
    from .remote import REMOTE_COMMANDS

    if args[0] not in REMOTE_COMMANDS:
        return args
    rest, moved = list(args[1:]), []
    i = 0
    while i < len(rest) and rest[i] != "--":
        if rest[i] in valued:
            i += 2  # the option and its value, whatever the value says
        elif rest[i] == "--host" and i + 1 < len(rest):
            moved += rest[i:i + 2]
            del rest[i:i + 2]
        elif rest[i].startswith("--host="):
            moved.append(rest.pop(i))
        else:
            i += 1
    return [*moved, args[0], *rest]


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             invoke_without_command=True)
@click.version_option(package_name="loopwarden", message=f"%(prog)s, version %(version)s ({compiled.describe()})")
@click.option("--host", metavar="HOST", help="Act on the daemon of another machine, over ssh (an ssh destination: "
                                             "box, user@box, an alias of ~/.ssh/config); e.g. --host box ls.")
@click.pass_context
def main(ctx: click.Context, host: str | None) -> None:
    """Supervise AI agent sessions: catch loops, stalls and runaway runs.

    \b
    With no command, opens the live console (`loopwarden console`).

    \b
    Start here:
      loopwarden demo                              the console on scripted agents that loop in every way
      loopwarden                                   the console on your own sessions
      loopwarden web                               the same console in a browser, behind a token
      loopwarden run -- python agent.py            supervise a command (Ctrl-C detaches)
      loopwarden ls / gates / approve s3:g1        see sessions, decide what waits for you
      loopwarden run --worktree -- python agent.py the agent in a git worktree of its own
      loopwarden diff s3 / worktree s3 merge       review what it changed, then merge it (or discard)
      loopwarden set s3 limits.max_cost_usd=2      raise a budget: a session held by it goes on
      loopwarden explain s3                        which rules fired on a session, and why
      loopwarden replay --format claude-code run.jsonl
      loopwarden config keys                       every setting, its default and what it accepts
      loopwarden notify test                       check that alerts reach your phone (notify.urls)
      loopwarden console --host box1 --host box2   sessions of several machines, over ssh
      loopwarden --host box1 approve s3:g1         decide a gate on another machine
    """
    if ctx.invoked_subcommand in (None, "console") and host:
        ctx.meta["hosts"] = (host,)  # the console attaches to it beside this machine's daemon
    elif host is not None:
        from ..runtime.hosts import HostError
        from .remote import choose

        try:
            choose(host, ctx.invoked_subcommand)
        except HostError as exc:  # a bad name, or a command that acts on this machine only
            raise Fail(str(exc)) from None
    if ctx.invoked_subcommand is None:
        ctx.invoke(load_command("console"))


def run() -> None:
    """Entry point: usage errors are one line and exit 2."""
    try:
        main.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("loopwarden: aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        if isinstance(exc, click.UsageError) and not isinstance(exc, Fail):
            cmd = exc.ctx.command_path if exc.ctx else "loopwarden"
            click.echo(f"loopwarden: error: {exc.format_message()} (see '{cmd} --help')", err=True)
            sys.exit(EXIT_USAGE)
        exc.show()
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
