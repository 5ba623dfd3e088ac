"""`python -m loopwarden`."""

from .cli import run

run()
