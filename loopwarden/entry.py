"""The `loopwarden` executable. `loopwarden hook AGENT` runs once per tool call, `where` once per --host
connection, and `serve` starts every daemon, so they skip the command-line machinery (click, every command
module, third-party adapters) and load only what they need."""

from __future__ import annotations

import sys

# the hook agents of the built-in hook adapters (sessions/registry.py reads their entry points: too slow to ask
# once per tool call); another package's hook agent is served by the command line, a little slower
BUILTIN_HOOK_AGENTS = ("claude-code", "codex")


def run() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "hook" and sys.argv[2] in BUILTIN_HOOK_AGENTS:
        from .hook_client import main

        sys.exit(main(agent=sys.argv[2]))
    if sys.argv[1:] in (["where"], ["where", "--json"]):  # run over ssh before every --host forward: kept quick
        from .runtime.hosts import where_main

        sys.exit(where_main(as_json=len(sys.argv) == 3))
    if sys.argv[1:] == ["serve"]:  # every daemon start (clients autostart it): without the command-line machinery
        sys.exit(_serve())
    from .cli import run as cli

    cli()


def _serve() -> int:
    """`loopwarden serve` as the command line runs it (cli/live.py), without importing the command line: a
    socket path too long for its profile is the same one line and exit code 3."""
    from .paths import SocketPathTooLong, default_paths
    from .runtime.daemon import run_daemon
    from .supervisor.visible import visible

    paths = default_paths()
    try:
        paths.socket  # noqa: B018 - the property checks the length
    except SocketPathTooLong as exc:
        sys.stderr.write(f"loopwarden: error: {visible(str(exc))}\n")
        return 3  # cli.common.EXIT_DAEMON
    return run_daemon(paths)
