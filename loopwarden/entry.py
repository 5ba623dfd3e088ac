"""The `loopwarden` executable. `loopwarden hook claude-code` and `hook codex` run once per tool call, and
`where` once per --host connection, so they skip the command-line machinery (click, every command module,
third-party adapters) and load only what they need."""

from __future__ import annotations

import sys


def run() -> None:
    if sys.argv[1:] in (["hook", "claude-code"], ["hook", "codex"]):
        from .hook_client import main

        sys.exit(main(agent="codex" if sys.argv[2] == "codex" else None))
    if sys.argv[1:] in (["where"], ["where", "--json"]):  # run over ssh before every --host forward: kept quick
        from .runtime.hosts import where_main

        sys.exit(where_main(as_json=len(sys.argv) == 3))
    from .cli import run as cli

    cli()
