"""The `loopwarden` executable. `loopwarden hook claude-code` and `hook codex` run once per tool call, so they
skip the command-line machinery (click, every command module, third-party adapters) and load only the hook
client."""

from __future__ import annotations

import sys


def run() -> None:
    if sys.argv[1:] in (["hook", "claude-code"], ["hook", "codex"]):
        from .hook_client import main

        sys.exit(main(agent="codex" if sys.argv[2] == "codex" else None))
    from .cli import run as cli

    cli()
