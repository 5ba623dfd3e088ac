"""Checking and naming the commands sessions run."""

from __future__ import annotations

import os
import shutil


def missing_program(program: str, path: str | None, cwd: str | None) -> str | None:
    """A one-line reason when `program` cannot be executed, else None."""
    if os.sep in program:
        full = program if os.path.isabs(program) else os.path.join(cwd or os.getcwd(), program)
        if not os.path.exists(full):
            return f"cannot start {program!r}: no such file"
        if os.path.isdir(full) or not os.access(full, os.X_OK):
            return f"cannot start {program!r}: not an executable file"
        return None
    if shutil.which(program, path=path) is None:
        hint = " (an option for loopwarden? put it before --)" if program.startswith("-") else ""
        return f"cannot start {program!r}: command not found{hint}"
    return None


_INTERPRETERS = ("python", "python3", "node", "bash", "sh", "ruby", "perl", "uv", "npx")


def default_name(command: list[str]) -> str:
    """A session name from its command: the script or module for interpreters, else the program."""
    program = os.path.basename(command[0])
    if program.rstrip("0123456789.") in _INTERPRETERS and len(command) > 1:
        args = command[1:]
        if args[0] == "-m" and len(args) > 1:
            return args[1].rsplit(".", 1)[-1]
        if args[0] != "-c" and not args[0].startswith("-"):
            return os.path.basename(args[0])
    return program
