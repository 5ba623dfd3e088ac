"""`python -m loopwarden`."""

from .entry import run

run()
