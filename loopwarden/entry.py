"""The `loopwarden` executable. `loopwarden hook claude-code` runs once per tool call, so it skips the
command-line machinery (click and every command module) and loads only the hook client."""

from __future__ import annotations

import sys


def run() -> None:
    if sys.argv[1:] == ["hook", "claude-code"]:
        from .hook_client import main

        sys.exit(main())
    from .cli import run as cli

    cli()
