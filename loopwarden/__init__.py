"""loopwarden: a terminal supervisor for AI agent sessions (see README.md)."""

from . import compiled as compiled  # first: whether the compiled engine or its Python source is imported
